# Python tests (pytest, run by Debian's /usr/bin/python3, which has numpy,
# torch and torchvision): the ctypes shim (test_shim.py), `sgrt run`
# (test_cli_run.py) and PyTorch parity of imported ONNX models
# (test_parity.py). They load the library this build made through
# SGRT_LIBRARY and run the CLI through SGRT_CLI.
#
# A sanitizer build's libsgrt.so cannot be loaded into an uninstrumented
# python3, so there only test_cli_run.py runs (it needs numpy and the sgrt
# binary, which is instrumented; its few shim-based tests skip), and the
# `sgrt run` case of tests/cli/test_cli.sh.
set(_sg_py /usr/bin/python3)
set(_sg_py_env "SGRT_LIBRARY=$<TARGET_FILE:sgrt>" "SGRT_CLI=$<TARGET_FILE:sgrt_cli>"
               "PYTHONDONTWRITEBYTECODE=1" "OMP_NUM_THREADS=2")
if(SG_SANITIZE)
  set(_sg_py_files test_cli_run)
else()
  set(_sg_py_files test_shim test_cli_run test_parity test_parity_ops test_parity_act)
endif()
foreach(f ${_sg_py_files})
  add_test(NAME python_${f}
           COMMAND ${_sg_py} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_LIST_DIR}/${f}.py
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(python_${f} PROPERTIES TIMEOUT 600 LABELS python ENVIRONMENT "${_sg_py_env}")
endforeach()
# The `run` case of tests/cli/test_cli.sh (unless tests/cli/tests.cmake lists it).
if(TARGET sgrt_cli AND NOT TEST cli_run)
  add_test(NAME cli_run COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/test_cli.sh run $<TARGET_FILE:sgrt_cli>
                                ${PROJECT_SOURCE_DIR}/tests/data)
  set_tests_properties(cli_run PROPERTIES TIMEOUT 120 LABELS cli)
endif()
# sgrt.Dist from Python: examples/python/train_dist.py under sgrt launch (check_train_dist.sh).
if(NOT SG_SANITIZE AND TARGET sgrt_cli)
  set(_sg_mlp_dist "")
  if(TARGET mlp_dist)
    set(_sg_mlp_dist $<TARGET_FILE:mlp_dist>)
  endif()
  add_test(NAME python_train_dist_np4
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_train_dist.sh $<TARGET_FILE:sgrt_cli> ${_sg_py} ${_sg_mlp_dist})
  set_tests_properties(python_train_dist_np4 PROPERTIES TIMEOUT 300 LABELS "python;dist" ENVIRONMENT "${_sg_py_env}")
endif()
