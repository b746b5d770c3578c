# Tests over a real link that can be cut (SPEC H3, H6): two network
# namespaces joined by a veth pair (netns.sh). They need root and skip (77)
# without it. RUN_SERIAL: they take the whole 10.77.0.0/24 setup and time
# bounds, which other load would blur.
add_executable(netns_allreduce ${CMAKE_CURRENT_LIST_DIR}/netns_allreduce.c)
target_link_libraries(netns_allreduce PRIVATE sgrt_static Threads::Threads)
target_compile_options(netns_allreduce PRIVATE ${SG_WARNINGS})

# Allreduce in a loop over UCX/TCP with liveness on; the link goes down after
# 3 s; both ranks must fail within 2 s of the cut instead of hanging.
add_test(NAME health_netns_link_down
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/netns.sh --down-after 3 --timeout 45 --
                 $<TARGET_FILE:netns_allreduce>)
set_tests_properties(health_netns_link_down PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
                                                       LABELS "health;netns" ENVIRONMENT "SG_COMM_TIMEOUT_MS=2000")

# Self-healing over a real link cut: 4 ranks of heal_worker, each in its own
# namespace on a bridge, the store in a fifth (netns_store); rank 3's link
# goes down 1 s into the run (steps paced at 200 ms); the other three must
# finish with the parameters of a failure-free run (made by the fixture,
# on loopback) and rank 3 must stop with an error.
add_executable(netns_store ${CMAKE_CURRENT_LIST_DIR}/netns_store.c)
target_link_libraries(netns_store PRIVATE sgrt_static Threads::Threads)
target_compile_options(netns_store PRIVATE ${SG_WARNINGS})
set(_sg_netns_heal_dir ${CMAKE_CURRENT_BINARY_DIR}/netns_heal)
file(MAKE_DIRECTORY ${_sg_netns_heal_dir}/ref ${_sg_netns_heal_dir}/run)
add_test(NAME heal_netns_ref COMMAND $<TARGET_FILE:sgrt_cli> launch -n 4 -- $<TARGET_FILE:heal_worker>
                                     ${_sg_netns_heal_dir}/ref)
set_tests_properties(heal_netns_ref PROPERTIES TIMEOUT 60 FIXTURES_SETUP heal_netns_ref LABELS "heal;netns")
add_test(NAME heal_netns_link_down
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/netns_heal.sh 4 3 1 $<TARGET_FILE:netns_store> --
                 $<TARGET_FILE:heal_worker> ${_sg_netns_heal_dir}/run ${_sg_netns_heal_dir}/ref)
set_tests_properties(heal_netns_link_down PROPERTIES TIMEOUT 90 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
                     FIXTURES_REQUIRED heal_netns_ref LABELS "heal;netns"
                     ENVIRONMENT "SG_COMM_TIMEOUT_MS=20000;HEAL_STEP_SLEEP_MS=200")
