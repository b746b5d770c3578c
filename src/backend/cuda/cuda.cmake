# The CUDA backend (src/backend/cuda). Include this at the end of
# src/CMakeLists.txt, after comm/nccl.cmake. cuda_emit.c (text only) is
# part of every build; the files that call CUDA libraries are compiled with
# SG_HAVE_CUDA only (cmake/SgDependencies.cmake found the toolkit, cuDNN and
# NCCL). libsgrt never links libcuda: the driver is reached through the
# runtime, so the library loads on machines without a GPU or a driver.
if(SG_HAVE_CUDA)
  target_sources(sgrt_objects PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cuda_nvrtc.c)
  target_compile_definitions(sgrt_objects PRIVATE SG_HAVE_CUDA_BACKEND=1)
  foreach(t sgrt sgrt_static)
    target_link_libraries(${t} PRIVATE $<BUILD_INTERFACE:sg::nvrtc>)
  endforeach()
  target_link_libraries(sgrt_static INTERFACE $<INSTALL_INTERFACE:${SG_CUDA_NVRTC_LIBRARY}>)
  target_link_libraries(sgrt_internal INTERFACE sg::nvrtc)
endif()
