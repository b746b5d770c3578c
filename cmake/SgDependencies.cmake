# Finds sgrt's dependencies and prints what was found. A missing required
# dependency stops configure and names the Debian package that provides it
# (scripts/install-deps.sh installs them all).
include(FindPackageHandleStandardArgs)
find_package(PkgConfig REQUIRED)

set(SG_DEP_SUMMARY "")
set(SG_DEP_MISSING "")

# sg_dep_found(NAME FOUND VERSION DEBIAN_PACKAGE REQUIRED)
function(sg_dep_report name found version debpkg required)
  if(found)
    set(line "  ${name}: found ${version}")
  elseif(required)
    set(line "  ${name}: MISSING (apt-get install ${debpkg})")
    set(SG_DEP_MISSING "${SG_DEP_MISSING} ${debpkg}" PARENT_SCOPE)
  else()
    set(line "  ${name}: not found (optional; ${debpkg})")
  endif()
  set(SG_DEP_SUMMARY "${SG_DEP_SUMMARY}${line}\n" PARENT_SCOPE)
endfunction()

# pkg-config based dependencies -> PkgConfig::<module>
macro(sg_pkg name module debpkg)
  pkg_check_modules(SG_PC_${name} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(SG_PC_${name}_FOUND)
    add_library(sg::${name} ALIAS PkgConfig::SG_PC_${name})
  endif()
  sg_dep_report(${name} "${SG_PC_${name}_FOUND}" "${SG_PC_${name}_VERSION}" ${debpkg} ON)
endmacro()

sg_pkg(xxhash libxxhash libxxhash-dev)
sg_pkg(ibverbs libibverbs libibverbs-dev)
sg_pkg(pmem libpmem libpmem-dev)
sg_pkg(protobufc libprotobuf-c libprotobuf-c-dev)

find_program(SG_PROTOC_C NAMES protoc-c protoc-gen-c)
sg_dep_report(protoc-c "${SG_PROTOC_C}" "${SG_PROTOC_C}" protobuf-c-compiler ON)
# The ONNX importer's protobuf code is generated at build time from the
# onnx.proto that Debian's python3-onnx ships (set SG_ONNX_PROTO to use another).
file(GLOB _sg_onnx_proto_hints /usr/lib/python3/dist-packages/onnx /usr/local/lib/python3*/dist-packages/onnx
     /usr/lib/python3*/site-packages/onnx /usr/local/lib/python3*/site-packages/onnx)
find_file(SG_ONNX_PROTO onnx.proto PATHS ${_sg_onnx_proto_hints} NO_DEFAULT_PATH)
sg_dep_report(onnx.proto "${SG_ONNX_PROTO}" "${SG_ONNX_PROTO}" python3-onnx ON)

# Packages that ship CMake config files.
find_package(ucx CONFIG QUIET)
sg_dep_report(UCX "${ucx_FOUND}" "${ucx_VERSION}" libucx-dev ON)
# oneDNN by its header and library, not its CMake config: Debian's
# dnnl-config.cmake requires OpenCL development files (oneDNN was built with
# its OpenCL GPU runtime) that sgrt, a CPU user of oneDNN, does not need.
find_path(DNNL_INCLUDE_DIR dnnl.h)
find_library(DNNL_LIBRARY dnnl)
if(DNNL_INCLUDE_DIR AND DNNL_LIBRARY AND EXISTS "${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h")
  file(STRINGS "${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _dv REGEX "#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*MAJOR +([0-9]+).*MINOR +([0-9]+).*PATCH +([0-9]+).*" "\\1.\\2.\\3" DNNL_VERSION "${_dv}")
  add_library(sg::dnnl UNKNOWN IMPORTED GLOBAL)
  set_target_properties(sg::dnnl PROPERTIES IMPORTED_LOCATION "${DNNL_LIBRARY}"
                                            INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}")
  set(DNNL_FOUND TRUE)
endif()
sg_dep_report(oneDNN "${DNNL_FOUND}" "${DNNL_VERSION}" libdnnl-dev ON)
# oneDNN runs on GNU OpenMP; sgrt sets its thread count through that runtime
# (omp_set_num_threads) without compiling its own code with -fopenmp, so gcc
# and clang builds share the one runtime oneDNN already loads.
find_library(SG_GOMP_LIBRARY NAMES gomp libgomp.so.1)
sg_dep_report(libgomp "${SG_GOMP_LIBRARY}" "${SG_GOMP_LIBRARY}" libgomp1 ON)
find_package(cJSON CONFIG QUIET)
sg_dep_report(cJSON "${cJSON_FOUND}" "${cJSON_VERSION}" libcjson-dev ON)
if(SG_BUILD_TESTS)
  sg_pkg(cmocka cmocka libcmocka-dev)
endif()

# METIS ships neither a config file nor a .pc in Debian.
find_path(METIS_INCLUDE_DIR metis.h)
find_library(METIS_LIBRARY metis)
if(METIS_INCLUDE_DIR AND METIS_LIBRARY)
  file(STRINGS "${METIS_INCLUDE_DIR}/metis.h" _mv REGEX "#define METIS_VER_(MAJOR|MINOR|SUBMINOR)")
  string(REGEX REPLACE ".*MAJOR +([0-9]+).*MINOR +([0-9]+).*SUBMINOR +([0-9]+).*" "\\1.\\2.\\3"
                       METIS_VERSION "${_mv}")
  add_library(sg::metis UNKNOWN IMPORTED GLOBAL)
  set_target_properties(sg::metis PROPERTIES IMPORTED_LOCATION "${METIS_LIBRARY}"
                                             INTERFACE_INCLUDE_DIRECTORIES "${METIS_INCLUDE_DIR}")
  set(METIS_FOUND TRUE)
endif()
sg_dep_report(METIS "${METIS_FOUND}" "${METIS_VERSION}" libmetis-dev ON)

# CUDA toolkit, cuDNN and NCCL: optional (SG_WITH_CUDA=AUTO|ON|OFF).
set(SG_HAVE_CUDA OFF)
if(NOT SG_WITH_CUDA STREQUAL "OFF")
  include(${CMAKE_CURRENT_LIST_DIR}/SgCuda.cmake)
  if(SG_CUDA_FOUND AND TARGET sg::nccl AND TARGET sg::cudnn)
    set(SG_HAVE_CUDA ON)
  endif()
  sg_dep_report("CUDA toolkit" "${SG_CUDA_FOUND}" "${SG_CUDA_VERSION} (${SG_CUDA_ROOT})"
                "CUDA toolkit under /usr/local/cuda" OFF)
  sg_dep_report(NCCL "${SG_CUDA_NCCL_LIBRARY}" "${SG_CUDA_NCCL_LIBRARY}" "libnccl-dev" OFF)
  sg_dep_report(cuDNN "${SG_CUDA_CUDNN_LIBRARY}" "${SG_CUDA_CUDNN_LIBRARY}" "cudnn" OFF)
  if(SG_WITH_CUDA STREQUAL "ON" AND NOT SG_HAVE_CUDA)
    message(FATAL_ERROR "SG_WITH_CUDA=ON but the CUDA toolkit, cuDNN or NCCL was not found")
  endif()
endif()

# Fuzzing needs clang's libFuzzer.
set(SG_HAVE_FUZZER OFF)
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  set(SG_HAVE_FUZZER ON)
endif()

message(STATUS "sgrt dependencies:\n${SG_DEP_SUMMARY}  CUDA backend: ${SG_HAVE_CUDA}\n  libFuzzer targets: ${SG_HAVE_FUZZER}")
if(SG_DEP_MISSING)
  message(FATAL_ERROR "sgrt: missing required dependencies. Install them with\n"
                      "  sudo apt-get install${SG_DEP_MISSING}\n"
                      "or run scripts/install-deps.sh")
endif()
