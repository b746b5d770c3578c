# CUDA backend tests (docs/cuda.md), built with the CUDA toolkit only.
#   test_cuda_host   what runs without a GPU: device strings, the no-GPU
#                    error, cuDNN graphs of every ResNet-50 convolution
#   cuda_no_libcuda  libsgrt does not link libcuda (it must load without a driver)
#   test_cuda_gpu    on a GPU (exit 77, skipped, without one)
# The emitter and NVRTC are tested by tests/unit/test_cuda_emit.c.
if(NOT SG_HAVE_CUDA)
  return()
endif()
add_executable(test_cuda_host ${CMAKE_CURRENT_LIST_DIR}/test_cuda_host.c ${CMAKE_CURRENT_LIST_DIR}/../unit/test_util.c
                              ${PROJECT_SOURCE_DIR}/examples/resnet50/resnet50_model.c)
target_link_libraries(test_cuda_host PRIVATE sgrt_internal sg::cmocka)
target_include_directories(test_cuda_host PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../unit)
target_include_directories(test_cuda_host SYSTEM PRIVATE ${SG_CUDA_INCLUDE_DIRS})
target_compile_options(test_cuda_host PRIVATE ${SG_WARNINGS})
target_compile_definitions(test_cuda_host PRIVATE SG_HAVE_CUDA_BACKEND=1 SG_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
add_test(NAME test_cuda_host COMMAND test_cuda_host)
set_tests_properties(test_cuda_host PROPERTIES TIMEOUT 300 LABELS cuda ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout")

add_test(NAME cuda_no_libcuda
         COMMAND bash -c "readelf -d \"$0\" | grep -q 'NEEDED.*libcudart' && ! readelf -d \"$0\" | grep 'NEEDED.*libcuda\\.so'"
                 $<TARGET_FILE:sgrt>)
set_tests_properties(cuda_no_libcuda PROPERTIES TIMEOUT 60 LABELS cuda)

# test_cuda_gpu: the backend on a GPU against the CPU backend (per-op parity,
# training, determinism, warm start). Exits 77 (skipped) without a GPU;
# scripts/gpu-check.sh runs it with --json on a GPU machine.
add_executable(test_cuda_gpu ${CMAKE_CURRENT_LIST_DIR}/test_cuda_gpu.c
                             ${PROJECT_SOURCE_DIR}/examples/resnet50/resnet50_model.c)
target_link_libraries(test_cuda_gpu PRIVATE sgrt sg::cudart m)
target_include_directories(test_cuda_gpu SYSTEM PRIVATE ${SG_CUDA_INCLUDE_DIRS})
target_compile_options(test_cuda_gpu PRIVATE ${SG_WARNINGS})
add_test(NAME test_cuda_gpu COMMAND test_cuda_gpu --resnet-batch 8 --resnet-res 64)
set_tests_properties(test_cuda_gpu PROPERTIES TIMEOUT 900 LABELS cuda SKIP_RETURN_CODE 77)
