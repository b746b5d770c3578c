# Multi-process tests of the communication layer (SPEC M1-M7), on loopback:
# comm_worker runs as every rank, started by `sgrt launch` or with
# torchrun-style variables set by hand (run_torchrun.sh). Every test has a
# CTest timeout, and every wait inside has SG_COMM_TIMEOUT_MS.
add_executable(comm_worker ${CMAKE_CURRENT_LIST_DIR}/comm_worker.c)
target_link_libraries(comm_worker PRIVATE sgrt_internal)
target_compile_options(comm_worker PRIVATE ${SG_WARNINGS})

set(_sg_launch $<TARGET_FILE:sgrt_cli> launch --label)
set(_sg_comm_env "SG_COMM_TIMEOUT_MS=20000")
foreach(n 2 3 4)
  add_test(NAME comm_coll_np${n} COMMAND ${_sg_launch} -n ${n} -- $<TARGET_FILE:comm_worker> coll)
  add_test(NAME comm_rma_np${n} COMMAND ${_sg_launch} -n ${n} -- $<TARGET_FILE:comm_worker> rma)
  add_test(NAME comm_torchrun_np${n}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_torchrun.sh ${n} $<TARGET_FILE:comm_worker> coll)
  set_tests_properties(comm_coll_np${n} comm_rma_np${n} comm_torchrun_np${n}
                       PROPERTIES TIMEOUT 90 LABELS comm ENVIRONMENT "${_sg_comm_env}")
endforeach()
foreach(n 2 4)
  add_test(NAME comm_big_np${n} COMMAND ${_sg_launch} -n ${n} -- $<TARGET_FILE:comm_worker> coll big)
  set_tests_properties(comm_big_np${n} PROPERTIES TIMEOUT 120 LABELS comm ENVIRONMENT "${_sg_comm_env}")
endforeach()
add_test(NAME comm_timeout COMMAND ${_sg_launch} -n 3 -- $<TARGET_FILE:comm_worker> timeout)
add_test(NAME comm_bad_token COMMAND ${_sg_launch} -n 2 -- $<TARGET_FILE:comm_worker> badtoken)
add_test(NAME comm_mismatch COMMAND ${_sg_launch} -n 3 -- $<TARGET_FILE:comm_worker> mismatch)
add_test(NAME comm_no_token_remote COMMAND ${CMAKE_COMMAND} -E env SG_RANK=0 SG_WORLD_SIZE=1
                                           $<TARGET_FILE:comm_worker> notoken)
set_tests_properties(comm_no_token_remote PROPERTIES TIMEOUT 30 LABELS comm)
set_tests_properties(comm_timeout comm_bad_token comm_mismatch
                     PROPERTIES TIMEOUT 60 LABELS comm ENVIRONMENT "SG_COMM_TIMEOUT_MS=2000")
# The launcher: output prefixed by rank with --label, the first failure's status returned.
add_test(NAME comm_launch_fail COMMAND ${_sg_launch} -n 2 -- sh -c "echo hi; exit \$SG_RANK")
set_tests_properties(comm_launch_fail PROPERTIES TIMEOUT 30 LABELS comm WILL_FAIL TRUE)
add_test(NAME comm_launch_prefix COMMAND ${_sg_launch} -n 2 -- sh -c "echo rank=\$SG_RANK of \$SG_WORLD_SIZE")
set_tests_properties(comm_launch_prefix PROPERTIES TIMEOUT 30 LABELS comm
                     PASS_REGULAR_EXPRESSION "\\[1\\] rank=1 of 2")
# Without --label the lines pass through as they are (srun's and mpirun's default), and each rank
# gets torchrun's variables beside sgrt's.
add_test(NAME comm_launch_plain
         COMMAND $<TARGET_FILE:sgrt_cli> launch -n 2 -- sh -c
                 "echo rank=\$RANK of \$WORLD_SIZE local \$LOCAL_RANK of \$LOCAL_WORLD_SIZE group \$GROUP_RANK at \$MASTER_ADDR:\$MASTER_PORT sg \$SG_RANK")
set_tests_properties(comm_launch_plain PROPERTIES TIMEOUT 30 LABELS comm
                     PASS_REGULAR_EXPRESSION "(^|\n)rank=1 of 2 local 1 of 2 group 0 at 127\\.0\\.0\\.1:[0-9]+ sg 1"
                     FAIL_REGULAR_EXPRESSION "\\[[01]\\]")
add_test(NAME comm_devices COMMAND $<TARGET_FILE:sgrt_cli> devices)
set_tests_properties(comm_devices PROPERTIES TIMEOUT 30 LABELS comm)
# Peer liveness (SPEC H1): heartbeats, a SIGKILLed and a SIGSTOPped rank. The
# victim rank runs in a child of its launched process (liveness_worker.c).
add_executable(comm_liveness_worker ${CMAKE_CURRENT_LIST_DIR}/liveness_worker.c)
target_link_libraries(comm_liveness_worker PRIVATE sgrt_static Threads::Threads)
target_compile_options(comm_liveness_worker PRIVATE ${SG_WARNINGS})
add_test(NAME comm_liveness_api COMMAND ${_sg_launch} -n 2 -- $<TARGET_FILE:comm_liveness_worker> api)
add_test(NAME comm_liveness_kill COMMAND ${_sg_launch} -n 3 -- $<TARGET_FILE:comm_liveness_worker> kill)
add_test(NAME comm_liveness_stop COMMAND ${_sg_launch} -n 3 -- $<TARGET_FILE:comm_liveness_worker> stop)
set_tests_properties(comm_liveness_api comm_liveness_kill comm_liveness_stop
                     PROPERTIES TIMEOUT 60 LABELS comm ENVIRONMENT "${_sg_comm_env}")
# The reductions against IEEE references, on the F16C and the portable path.
add_executable(comm_reduce_test ${CMAKE_CURRENT_LIST_DIR}/reduce_test.c)
target_link_libraries(comm_reduce_test PRIVATE sgrt_internal)
target_compile_options(comm_reduce_test PRIVATE ${SG_WARNINGS})
add_test(NAME comm_reduce COMMAND comm_reduce_test)
set_tests_properties(comm_reduce PROPERTIES TIMEOUT 60 LABELS comm)
# NCCL device collectives (src/comm/nccl.c): skipped (exit 77) where the
# library lacks NCCL or the machine lacks a GPU per rank; argument and
# "unsupported" checks run everywhere.
add_executable(comm_nccl_worker ${CMAKE_CURRENT_LIST_DIR}/nccl_worker.c)
target_link_libraries(comm_nccl_worker PRIVATE sgrt_internal)
target_compile_options(comm_nccl_worker PRIVATE ${SG_WARNINGS})
if(SG_HAVE_CUDA)
  target_compile_definitions(comm_nccl_worker PRIVATE SG_TEST_CUDA=1)
  target_link_libraries(comm_nccl_worker PRIVATE sg::cudart)
endif()
foreach(n 1 2)
  add_test(NAME comm_nccl_np${n} COMMAND ${_sg_launch} -n ${n} -- $<TARGET_FILE:comm_nccl_worker>)
  set_tests_properties(comm_nccl_np${n} PROPERTIES TIMEOUT 120 LABELS comm SKIP_RETURN_CODE 77
                                                   ENVIRONMENT "${_sg_comm_env}")
endforeach()
# The rendezvous store under attack (src/comm/store_server.c): each hostile
# client of store_attacks.c against a store in the test's own process while an
# honest client works (comm_store_attack), and all of them at once against a
# 4-rank job's store, during which a rank is killed: the job must heal and the
# launcher exit 0 (comm_store_attack_heal_np4, run_store_attack.sh).
add_executable(comm_store_attack_test ${CMAKE_CURRENT_LIST_DIR}/store_attack_test.c
                                      ${CMAKE_CURRENT_LIST_DIR}/store_attacks.c ${PROJECT_SOURCE_DIR}/tests/unit/test_util.c)
target_link_libraries(comm_store_attack_test PRIVATE sgrt_internal sg::cmocka)
target_include_directories(comm_store_attack_test PRIVATE ${PROJECT_SOURCE_DIR}/tests/unit)
target_compile_definitions(comm_store_attack_test PRIVATE SG_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
target_compile_options(comm_store_attack_test PRIVATE ${SG_WARNINGS})
add_test(NAME comm_store_attack COMMAND comm_store_attack_test)
set_tests_properties(comm_store_attack PROPERTIES TIMEOUT 120 LABELS comm ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout")
add_executable(store_attack_tool ${CMAKE_CURRENT_LIST_DIR}/store_attack_tool.c ${CMAKE_CURRENT_LIST_DIR}/store_attacks.c)
target_link_libraries(store_attack_tool PRIVATE Threads::Threads)
target_compile_options(store_attack_tool PRIVATE ${SG_WARNINGS})
add_test(NAME comm_store_attack_heal_np4
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_store_attack.sh $<TARGET_FILE:sgrt_cli>
                 $<TARGET_FILE:store_attack_tool> $<TARGET_FILE:heal_worker> ${CMAKE_CURRENT_BINARY_DIR}/store_attack)
set_tests_properties(comm_store_attack_heal_np4 PROPERTIES TIMEOUT 400 LABELS "comm;heal"
                                                           ENVIRONMENT "SG_COMM_TIMEOUT_MS=20000")
