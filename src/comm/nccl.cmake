# NCCL collectives on device memory (src/comm/nccl.c). Include this at the end
# of src/CMakeLists.txt (it needs sgrt_objects, sgrt, sgrt_static and
# sgrt_internal to exist):
#   include(${CMAKE_CURRENT_SOURCE_DIR}/comm/nccl.cmake)
# With SG_HAVE_CUDA (cmake/SgDependencies.cmake found the CUDA toolkit, NCCL
# and cuDNN) nccl.c is compiled against nccl.h and the libraries link cudart
# and NCCL; otherwise nccl.c builds its SG_ERR_UNSUPPORTED variant and this
# file adds nothing.
if(SG_HAVE_CUDA)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/nccl.c PROPERTIES COMPILE_DEFINITIONS SG_HAVE_NCCL=1)
  # SYSTEM: the CUDA headers are not ours to keep -Werror clean.
  target_include_directories(sgrt_objects SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS} ${NCCL_INCLUDE_DIR})
  foreach(t sgrt sgrt_static)
    target_link_libraries(${t} PRIVATE $<BUILD_INTERFACE:CUDA::cudart> $<BUILD_INTERFACE:${NCCL_LIBRARY}>)
  endforeach()
  # An installed static library's users link them by path (as METIS by name).
  target_link_libraries(sgrt_static INTERFACE $<INSTALL_INTERFACE:${NCCL_LIBRARY}>
                                              $<INSTALL_INTERFACE:${CUDAToolkit_LIBRARY_DIR}/libcudart.so>)
  # Tests link sgrt_internal (the static library and its dependencies).
  target_link_libraries(sgrt_internal INTERFACE CUDA::cudart ${NCCL_LIBRARY})
endif()
