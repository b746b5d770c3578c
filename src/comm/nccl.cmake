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
  # SYSTEM: the CUDA headers are not ours to keep warning-free.
  target_include_directories(sgrt_objects SYSTEM PRIVATE ${SG_CUDA_INCLUDE_DIRS})
  foreach(t sgrt sgrt_static)
    target_link_libraries(${t} PRIVATE $<BUILD_INTERFACE:sg::cudart> $<BUILD_INTERFACE:sg::nccl>)
  endforeach()
  # An installed static library's users link them by path (as METIS by name).
  target_link_libraries(sgrt_static INTERFACE $<INSTALL_INTERFACE:${SG_CUDA_NCCL_LIBRARY}>
                                              $<INSTALL_INTERFACE:${SG_CUDA_CUDART_LIBRARY}>)
  # Tests link sgrt_internal (the static library and its dependencies).
  target_link_libraries(sgrt_internal INTERFACE sg::cudart sg::nccl)
endif()
