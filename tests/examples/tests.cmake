# Examples that produce figures are run with --json and their last line checked.
if(TARGET mlp_train)
  add_test(NAME example_mlp_train
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_mlp_train.sh $<TARGET_FILE:mlp_train>)
  set_tests_properties(example_mlp_train PROPERTIES TIMEOUT 600 LABELS examples)
endif()

# ResNet-50 (examples/resnet50): torchvision's parameter count, learning on
# the generated images, and the same loss as the ONNX import of torchvision's
# own model.
if(TARGET resnet50_train)
  add_test(NAME example_resnet50_params
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_resnet50.sh params $<TARGET_FILE:resnet50_train>)
  set_tests_properties(example_resnet50_params PROPERTIES TIMEOUT 300 LABELS examples)
  # Minutes of ResNet-50 training: the plain build checks that it learns; the
  # sanitizer build's instrumented kernels would take many times longer.
  if(NOT SG_SANITIZE)
    add_test(NAME example_resnet50_learns
             COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_resnet50.sh learns $<TARGET_FILE:resnet50_train>)
    set_tests_properties(example_resnet50_learns PROPERTIES TIMEOUT 900 LABELS examples)
    add_test(NAME example_resnet50_defaults_learn
             COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_resnet50.sh defaults $<TARGET_FILE:resnet50_train>)
    set_tests_properties(example_resnet50_defaults_learn PROPERTIES TIMEOUT 600 LABELS examples)
  endif()
endif()
# Fusion and the compile cache through the ResNet-50 example: fused and
# unfused training agree bitwise, cold and warm starts, 4 cold processes on
# one cache, corrupted entries, a refused and a full cache directory. Not in
# the sanitizer builds (minutes of instrumented ResNet-50 each; the same code
# paths run there through tests/unit/test_fusion.c).
if(TARGET resnet50_train AND NOT SG_SANITIZE)
  foreach(m parity concurrent corrupt denied nospace)
    add_test(NAME example_fusion_${m}
             COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_fusion.sh ${m} $<TARGET_FILE:resnet50_train>)
    set_tests_properties(example_fusion_${m} PROPERTIES TIMEOUT 600 LABELS "examples;fusion" SKIP_RETURN_CODE 77)
  endforeach()
endif()
if(TARGET resnet50_dist AND NOT SG_SANITIZE)
  add_test(NAME example_fusion_dist COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_fusion.sh dist
                                            $<TARGET_FILE:resnet50_dist> $<TARGET_FILE:sgrt_cli>)
  set_tests_properties(example_fusion_dist PROPERTIES TIMEOUT 600 LABELS "examples;fusion;dist")
endif()
if(TARGET mlp_train)
  add_test(NAME example_fusion_mlp COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_fusion.sh mlp $<TARGET_FILE:mlp_train>)
  set_tests_properties(example_fusion_mlp PROPERTIES TIMEOUT 300 LABELS "examples;fusion")
endif()
if(TARGET resnet50_onnx_check)
  add_test(NAME example_resnet50_onnx
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_resnet50.sh onnx $<TARGET_FILE:resnet50_onnx_check>
                   ${CMAKE_CURRENT_BINARY_DIR}/resnet50_onnx)
  set_tests_properties(example_resnet50_onnx PROPERTIES TIMEOUT 600 LABELS examples SKIP_RETURN_CODE 77)
endif()
if(TARGET resnet50_dist)
  add_test(NAME example_resnet50_dist_offload
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_resnet50_dist.sh offload $<TARGET_FILE:sgrt_cli>
                   $<TARGET_FILE:resnet50_dist>)
  set_tests_properties(example_resnet50_dist_offload PROPERTIES TIMEOUT 300 LABELS "examples;gmem"
                                                                ENVIRONMENT "SG_COMM_TIMEOUT_MS=60000")
  add_test(NAME example_resnet50_dist_rejoin
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_resnet50_dist.sh rejoin $<TARGET_FILE:sgrt_cli>
                   $<TARGET_FILE:resnet50_dist>)
  set_tests_properties(example_resnet50_dist_rejoin PROPERTIES TIMEOUT 300 LABELS "examples;heal"
                                                               ENVIRONMENT "SG_COMM_TIMEOUT_MS=30000")
  # The example's defaults and the demo's model (scripts/demo.args) lower the loss.
  if(NOT SG_SANITIZE)
    add_test(NAME example_resnet50_dist_defaults_learn
             COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_resnet50_dist.sh learns $<TARGET_FILE:sgrt_cli>
                     $<TARGET_FILE:resnet50_dist> ${PROJECT_SOURCE_DIR}/scripts/demo.args)
    set_tests_properties(example_resnet50_dist_defaults_learn PROPERTIES TIMEOUT 600 LABELS examples
                                                                        ENVIRONMENT "SG_COMM_TIMEOUT_MS=60000")
    # An injected slow rank (slow:rank=2,step=2,factor=10) is reported DEGRADED, too slow, not healed.
    add_test(NAME example_resnet50_dist_slow
             COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_resnet50_dist.sh slow $<TARGET_FILE:sgrt_cli>
                     $<TARGET_FILE:resnet50_dist>)
    set_tests_properties(example_resnet50_dist_slow PROPERTIES TIMEOUT 300 LABELS "examples;heal"
                                                             ENVIRONMENT "SG_COMM_TIMEOUT_MS=60000")
    # A pipeline of tensor groups (--pipeline 2 --tensor 2) heals a killed rank.
    add_test(NAME example_resnet50_dist_pptp_heal
             COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_resnet50_dist.sh pptp $<TARGET_FILE:sgrt_cli>
                     $<TARGET_FILE:resnet50_dist>)
    set_tests_properties(example_resnet50_dist_pptp_heal PROPERTIES TIMEOUT 300 LABELS "examples;heal"
                                                                   ENVIRONMENT "SG_COMM_TIMEOUT_MS=60000")
  endif()
endif()
# Watching a run: --metrics-port (promtool, and a Prometheus server that scrapes the job) and
# --metrics-file on a 4-rank resnet50_dist job (check_metrics.sh; skips without prometheus).
if(TARGET resnet50_dist)
  add_test(NAME example_resnet50_dist_metrics
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_metrics.sh $<TARGET_FILE:sgrt_cli> $<TARGET_FILE:resnet50_dist>)
  set_tests_properties(example_resnet50_dist_metrics PROPERTIES TIMEOUT 300 LABELS "examples;dist" SKIP_RETURN_CODE 77
                       RUN_SERIAL TRUE)
endif()
# TensorBoard scalars, read back by the tensorboard package's reader (check_tensorboard.sh; skips without it).
if(TARGET resnet50_dist)
  add_test(NAME example_resnet50_dist_tensorboard
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_tensorboard.sh $<TARGET_FILE:sgrt_cli> $<TARGET_FILE:resnet50_dist>)
  set_tests_properties(example_resnet50_dist_tensorboard PROPERTIES TIMEOUT 300 LABELS "examples;dist"
                       SKIP_RETURN_CODE 77)
endif()
# GPT-2 (examples/gpt2): the tiny preset learns the licence texts and samples; the options' errors.
if(TARGET gpt2_train)
  add_test(NAME example_gpt2_errors COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_gpt2.sh errors $<TARGET_FILE:gpt2_train>)
  set_tests_properties(example_gpt2_errors PROPERTIES TIMEOUT 120 LABELS examples)
  add_test(NAME example_gpt2_profile COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_gpt2.sh profile $<TARGET_FILE:gpt2_train>)
  set_tests_properties(example_gpt2_profile PROPERTIES TIMEOUT 120 LABELS examples)
  add_test(NAME example_gpt2_dropout COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_gpt2.sh dropout $<TARGET_FILE:gpt2_train>)
  set_tests_properties(example_gpt2_dropout PROPERTIES TIMEOUT 120 LABELS examples)
  add_test(NAME example_gpt2_bf16 COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_gpt2.sh bf16 $<TARGET_FILE:gpt2_train>)
  set_tests_properties(example_gpt2_bf16 PROPERTIES TIMEOUT 120 LABELS examples SKIP_RETURN_CODE 77)
  if(NOT SG_SANITIZE)
    add_test(NAME example_gpt2_learns COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_gpt2.sh learns $<TARGET_FILE:gpt2_train>)
    set_tests_properties(example_gpt2_learns PROPERTIES TIMEOUT 600 LABELS "examples;gpt2")
  endif()
endif()
