# The global memory mapping (SPEC A1-A6, src/gmem): cmocka tests on one node,
# and multi-process tests on loopback where gmem_worker runs as every rank,
# started by `sgrt launch`. Every test has a CTest timeout, and every wait
# inside has SG_COMM_TIMEOUT_MS.
foreach(name gva table tiers offload)
  set(exe test_gmem_${name})
  add_executable(${exe} ${CMAKE_CURRENT_LIST_DIR}/${exe}.c ${CMAKE_CURRENT_LIST_DIR}/../unit/test_util.c)
  target_link_libraries(${exe} PRIVATE sgrt_internal sg::cmocka)
  target_include_directories(${exe} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../unit)
  target_compile_options(${exe} PRIVATE ${SG_WARNINGS})
  target_compile_definitions(${exe} PRIVATE SG_TEST_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/../data")
  add_test(NAME gmem_${name} COMMAND ${exe})
  set_tests_properties(gmem_${name} PROPERTIES TIMEOUT 60 LABELS gmem ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout")
endforeach()

add_executable(gmem_worker ${CMAKE_CURRENT_LIST_DIR}/gmem_worker.c)
target_link_libraries(gmem_worker PRIVATE sgrt_internal)
target_compile_options(gmem_worker PRIVATE ${SG_WARNINGS})
foreach(mode cas coherent errors remote)
  add_test(NAME gmem_${mode}_np4 COMMAND $<TARGET_FILE:sgrt_cli> launch -n 4 -- $<TARGET_FILE:gmem_worker> ${mode})
  set_tests_properties(gmem_${mode}_np4 PROPERTIES TIMEOUT 90 LABELS gmem ENVIRONMENT "SG_COMM_TIMEOUT_MS=20000")
endforeach()
add_test(NAME gmem_cas_np2 COMMAND $<TARGET_FILE:sgrt_cli> launch -n 2 -- $<TARGET_FILE:gmem_worker> cas)
set_tests_properties(gmem_cas_np2 PROPERTIES TIMEOUT 90 LABELS gmem ENVIRONMENT "SG_COMM_TIMEOUT_MS=20000")
