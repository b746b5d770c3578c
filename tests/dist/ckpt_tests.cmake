# sg_dist_save_checkpoint (include/sgrt/dist.h, docs/dist.md "A checkpoint of the whole model"): ckpt_worker
# runs as every rank under `sgrt launch`, trains an MLP 3 steps in one parallel mode, saves the whole model
# from every rank's part, and rank 0 loads the file into a one-process session and compares it with one
# process's 3 steps; then an unwritable path and a NULL path must fail on every rank (nobody left waiting).
add_executable(ckpt_worker ${CMAKE_CURRENT_LIST_DIR}/ckpt_worker.c ${CMAKE_CURRENT_LIST_DIR}/dist_models.c
                           ${PROJECT_SOURCE_DIR}/examples/resnet50/resnet50_model.c)
target_link_libraries(ckpt_worker PRIVATE sgrt_internal m)
target_compile_options(ckpt_worker PRIVATE ${SG_WARNINGS})

set(_sg_ckpt_launch $<TARGET_FILE:sgrt_cli> launch --label)
set(_sg_ckpt_worker $<TARGET_FILE:ckpt_worker>)
set(_sg_ckpt_tests)
foreach(_case "dp;2" "zero;2" "pp;2" "tp;2" "pptp;4" "tpdp;4" "adamw;2")
  list(GET _case 0 _mode)
  list(GET _case 1 _n)
  set(_dir ${CMAKE_CURRENT_BINARY_DIR}/dist/ckpt_${_mode})
  file(MAKE_DIRECTORY ${_dir})
  add_test(NAME dist_ckpt_${_mode}_np${_n} COMMAND ${_sg_ckpt_launch} -n ${_n} -- ${_sg_ckpt_worker} ${_mode} ${_dir})
  list(APPEND _sg_ckpt_tests dist_ckpt_${_mode}_np${_n})
endforeach()
set_tests_properties(${_sg_ckpt_tests} PROPERTIES TIMEOUT 120 LABELS "dist;model"
                     ENVIRONMENT "SG_COMM_TIMEOUT_MS=30000")
