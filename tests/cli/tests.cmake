# Tests of the sgrt command-line tool (tests/cli/test_cli.sh), one CTest test
# per case. They read tests/data/mlp.sgg and cnn.sgg; the `example` case runs
# examples/build_graph and inspects what it wrote. `not_regular` gives FIFOs,
# devices, sockets and directories as inputs and outputs, `numbers` malformed
# and out-of-range option values; `example_numbers` does that to the examples
# built next to build_graph (mlp_train, resnet50_*). `cache` fills a compile
# cache with mlp_train's generated kernels and lists, inspects and clears it.
set(_sg_cli_cases inspect_mlp inspect_cnn inspect_onnx verify dot bad_input help partition not_regular numbers devices)
set(_sg_cli_example "")
if(SG_BUILD_EXAMPLES)
  list(APPEND _sg_cli_cases example example_numbers cache)
  set(_sg_cli_example $<TARGET_FILE:build_graph>)
endif()
foreach(c ${_sg_cli_cases})
  add_test(NAME cli_${c}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_cli.sh ${c} $<TARGET_FILE:sgrt_cli>
                   ${PROJECT_SOURCE_DIR}/tests/data ${_sg_cli_example})
  set_tests_properties(cli_${c} PROPERTIES TIMEOUT 120 LABELS cli)
endforeach()
