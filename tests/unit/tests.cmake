# The worked example that opens include/sgrt/sgrt.h: cut out of the header
# comment at build time (extract_example.cmake), built like a user's program
# (the shared library and the public headers only, the project's warnings as
# errors) and run under `sgrt launch` (which picks a free port for the
# rendezvous) as a job of one rank and of two. It must exit 0: the example
# cannot fall behind the API unnoticed.
set(_sg_example_c ${CMAKE_CURRENT_BINARY_DIR}/sgrt_h_example.c)
add_custom_command(
  OUTPUT ${_sg_example_c}
  COMMAND ${CMAKE_COMMAND} -DHEADER=${PROJECT_SOURCE_DIR}/include/sgrt/sgrt.h -DOUT=${_sg_example_c} -P
          ${CMAKE_CURRENT_LIST_DIR}/extract_example.cmake
  DEPENDS ${PROJECT_SOURCE_DIR}/include/sgrt/sgrt.h ${CMAKE_CURRENT_LIST_DIR}/extract_example.cmake
  COMMENT "Extracting the worked example of include/sgrt/sgrt.h")
add_executable(sgrt_h_example ${_sg_example_c})
target_link_libraries(sgrt_h_example PRIVATE sgrt)
target_compile_options(sgrt_h_example PRIVATE ${SG_WARNINGS})
add_test(NAME sgrt_h_example_np1 COMMAND $<TARGET_FILE:sgrt_cli> launch -n 1 -- $<TARGET_FILE:sgrt_h_example>)
add_test(NAME sgrt_h_example_np2 COMMAND $<TARGET_FILE:sgrt_cli> launch -n 2 -- $<TARGET_FILE:sgrt_h_example>)
set_tests_properties(sgrt_h_example_np1 sgrt_h_example_np2 PROPERTIES TIMEOUT 120 LABELS examples
                     ENVIRONMENT "SG_COMM_TIMEOUT_MS=30000")

# The CUDA emitter's test builds ResNet-50's training graph (the example's
# model) and, with the CUDA toolkit, compiles its programs with NVRTC.
target_sources(test_cuda_emit PRIVATE ${PROJECT_SOURCE_DIR}/examples/resnet50/resnet50_model.c
                                     ${CMAKE_CURRENT_LIST_DIR}/cuda_emu.c)
# sgrt's own CUDA kernels run on the host (cuda_emu.c).
target_sources(test_cuda_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cuda_emu.c)
if(SG_HAVE_CUDA)
  target_compile_definitions(test_cuda_emit PRIVATE SG_HAVE_CUDA_BACKEND=1)
endif()

# Issue 19's bar for free mode is checked on the example's ResNet-50.
target_sources(test_partition_resnet PRIVATE ${PROJECT_SOURCE_DIR}/examples/resnet50/resnet50_model.c)
# What users copy out of the public headers compiles cleanly under -Wall -Wextra -Werror with
# nothing turned off (the project's own warnings leave out -Wmissing-field-initializers): each
# header's worked example and every SG_*_INIT macro (check_header_examples.cmake).
add_test(NAME public_header_examples_wextra
         COMMAND ${CMAKE_COMMAND} -DCC=${CMAKE_C_COMPILER} -DINCLUDE=${PROJECT_SOURCE_DIR}/include
                 -DPRELUDE=${CMAKE_CURRENT_LIST_DIR}/header_example_prelude.h
                 -DWORK=${CMAKE_CURRENT_BINARY_DIR}/header_examples -P
                 ${CMAKE_CURRENT_LIST_DIR}/check_header_examples.cmake)
set_tests_properties(public_header_examples_wextra PROPERTIES TIMEOUT 120 LABELS unit)
