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
