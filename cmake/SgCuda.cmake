# Finds the CUDA toolkit's headers and libraries, cuDNN and NCCL without
# CMake's FindCUDAToolkit: that module in stock CMake 3.25 (Debian 12) stops
# configure with "set_property could not find TARGET CUDA::nvToolsExt" on
# toolkits that no longer ship nvToolsExt (CUDA 12.9 and later), and sgrt
# needs only a handful of libraries it can find by name.
#
# Sets SG_CUDA_FOUND, SG_CUDA_VERSION (e.g. 13.0), SG_CUDA_ROOT,
# SG_CUDA_INCLUDE_DIRS and one imported target per library found:
#   sg::cudart  sg::cuda (driver; the toolkit's stub when no driver is installed)
#   sg::cublas  sg::cublasLt  sg::nvrtc  sg::cudnn  sg::nccl
# Hints: CUDAToolkit_ROOT or CUDA_HOME or CUDA_PATH, then /usr/local/cuda.
set(SG_CUDA_FOUND FALSE)
set(_sg_cuda_hints ${CUDAToolkit_ROOT} $ENV{CUDAToolkit_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH} /usr/local/cuda)
find_path(SG_CUDA_INCLUDE_DIR cuda_runtime_api.h HINTS ${_sg_cuda_hints} PATH_SUFFIXES include
          targets/x86_64-linux/include targets/sbsa-linux/include)
if(NOT SG_CUDA_INCLUDE_DIR)
  return()
endif()
get_filename_component(SG_CUDA_ROOT "${SG_CUDA_INCLUDE_DIR}/.." ABSOLUTE)
file(STRINGS "${SG_CUDA_INCLUDE_DIR}/cuda_runtime_api.h" _sg_cudart_v REGEX "^#define CUDART_VERSION +[0-9]+")
string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _sg_cudart_v "${_sg_cudart_v}")
if(_sg_cudart_v MATCHES "^[0-9]+$")
  math(EXPR _sg_major "${_sg_cudart_v} / 1000")
  math(EXPR _sg_minor "(${_sg_cudart_v} % 1000) / 10")
  set(SG_CUDA_VERSION "${_sg_major}.${_sg_minor}")
endif()

set(_sg_cuda_libdirs ${SG_CUDA_ROOT}/lib64 ${SG_CUDA_ROOT}/lib ${SG_CUDA_ROOT}/targets/x86_64-linux/lib
                     ${SG_CUDA_ROOT}/targets/sbsa-linux/lib)
# sg_cuda_lib(TARGET NAME [HEADER]): imported target sg::TARGET for libNAME.
function(sg_cuda_lib target name)
  string(TOUPPER "SG_CUDA_${target}_LIBRARY" var)
  find_library(${var} ${name} HINTS ${_sg_cuda_libdirs} ${ARGN})
  if(${var} AND NOT TARGET sg::${target})
    add_library(sg::${target} UNKNOWN IMPORTED GLOBAL)
    set_target_properties(sg::${target} PROPERTIES IMPORTED_LOCATION "${${var}}"
                                                   INTERFACE_INCLUDE_DIRECTORIES "${SG_CUDA_INCLUDE_DIR}")
  endif()
endfunction()
sg_cuda_lib(cudart cudart)
sg_cuda_lib(cublas cublas)
sg_cuda_lib(cublasLt cublasLt)
sg_cuda_lib(nvrtc nvrtc)
sg_cuda_lib(cudnn cudnn)
sg_cuda_lib(nccl nccl)
# The driver library comes with the driver, not the toolkit: the installed
# one first, else the toolkit's stub, so that CUDA code links on machines
# without a GPU (the stub has no libcuda.so.1, so it never loads at run time).
find_library(SG_CUDA_CUDA_LIBRARY NAMES libcuda.so.1 cuda NO_CMAKE_PATH NO_CMAKE_ENVIRONMENT_PATH)
sg_cuda_lib(cuda cuda ${SG_CUDA_ROOT}/lib64/stubs ${SG_CUDA_ROOT}/targets/x86_64-linux/lib/stubs
            ${SG_CUDA_ROOT}/targets/sbsa-linux/lib/stubs)

find_path(SG_CUDNN_INCLUDE_DIR cudnn.h HINTS ${SG_CUDA_INCLUDE_DIR} ${SG_CUDA_ROOT}/include)
find_path(SG_NCCL_INCLUDE_DIR nccl.h HINTS ${SG_CUDA_INCLUDE_DIR} ${SG_CUDA_ROOT}/include)
set(SG_CUDA_INCLUDE_DIRS ${SG_CUDA_INCLUDE_DIR})
foreach(d ${SG_CUDNN_INCLUDE_DIR} ${SG_NCCL_INCLUDE_DIR})
  list(APPEND SG_CUDA_INCLUDE_DIRS ${d})
endforeach()
list(REMOVE_DUPLICATES SG_CUDA_INCLUDE_DIRS)
if(TARGET sg::cudart)
  set(SG_CUDA_FOUND TRUE)
endif()
