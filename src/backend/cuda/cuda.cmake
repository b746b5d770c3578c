# The CUDA backend (src/backend/cuda). Include this at the end of
# src/CMakeLists.txt, after comm/nccl.cmake. cuda_emit.c and cuda_kernels.c (text only) and
# cuda_devices.c (which says "no CUDA backend" without it) are part of
# every build; the files that call CUDA libraries are compiled with
# SG_HAVE_CUDA only (cmake/SgDependencies.cmake found the toolkit, cuDNN and
# NCCL). libsgrt never links libcuda: the driver is reached through the
# runtime, so the library loads on machines without a GPU or a driver.
if(SG_HAVE_CUDA)
  file(GLOB _sg_cuda_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.c)
  list(REMOVE_ITEM _sg_cuda_sources ${CMAKE_CURRENT_LIST_DIR}/cuda_emit.c ${CMAKE_CURRENT_LIST_DIR}/cuda_kernels.c
              ${CMAKE_CURRENT_LIST_DIR}/cuda_devices.c)
  target_sources(sgrt_objects PRIVATE ${_sg_cuda_sources})
  # The CUDA headers are not ours to keep warning-free; cuDNN's legacy
  # convolution API (the fallback of cuda_conv.c) is marked deprecated.
  target_include_directories(sgrt_objects SYSTEM PRIVATE ${SG_CUDA_INCLUDE_DIRS})
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cuda_conv.c ${CMAKE_CURRENT_LIST_DIR}/cuda_norm_pool.c
                              PROPERTIES COMPILE_OPTIONS "-Wno-deprecated-declarations")
  target_compile_definitions(sgrt_objects PRIVATE SG_HAVE_CUDA_BACKEND=1)
  foreach(t sgrt sgrt_static)
    target_link_libraries(${t} PRIVATE $<BUILD_INTERFACE:sg::nvrtc> $<BUILD_INTERFACE:sg::cublasLt>
                                       $<BUILD_INTERFACE:sg::cudnn>)
  endforeach()
  target_link_libraries(sgrt_static INTERFACE $<INSTALL_INTERFACE:${SG_CUDA_NVRTC_LIBRARY}>
                                              $<INSTALL_INTERFACE:${SG_CUDA_CUBLASLT_LIBRARY}>
                                              $<INSTALL_INTERFACE:${SG_CUDA_CUDNN_LIBRARY}>)
  target_link_libraries(sgrt_internal INTERFACE sg::nvrtc sg::cublasLt sg::cudnn)
endif()
