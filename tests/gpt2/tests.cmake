# GPT-2 against PyTorch (issue 21), as llm.c's test_gpt2: gpt2_ref.py (Debian's torch) draws the weights
# and a batch and writes logits, loss, gradients, a 10-step AdamW loss curve and the final parameters;
# gpt2_parity (the examples/gpt2 model) must match them. Skipped (77) without torch.
if(TARGET sg_gpt2_model)
  add_executable(gpt2_parity ${CMAKE_CURRENT_LIST_DIR}/gpt2_parity.c)
  target_link_libraries(gpt2_parity PRIVATE sg_gpt2_model sgrt m)
  target_compile_options(gpt2_parity PRIVATE ${SG_WARNINGS})
  # mini (6 layers, width 384) is minutes of instrumented kernels under the sanitizers: the plain build.
  set(_presets tiny)
  if(NOT SG_SANITIZE)
    list(APPEND _presets mini)
  endif()
  foreach(_preset ${_presets})
    add_test(NAME gpt2_parity_${_preset}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh $<TARGET_FILE:gpt2_parity>
                     ${CMAKE_CURRENT_BINARY_DIR}/gpt2_ref_${_preset} ${_preset})
    set_tests_properties(gpt2_parity_${_preset} PROPERTIES TIMEOUT 900 LABELS "numerics;gpt2" SKIP_RETURN_CODE 77)
  endforeach()
  # The same model with the fused attention op (sg_attention) against the same PyTorch run: tiny in the
  # suite (mini, 3 minutes here, by hand: GPT2_PARITY_ARGS=--fused-attention bash run_parity.sh ... mini).
  add_test(NAME gpt2_parity_tiny_fused
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh $<TARGET_FILE:gpt2_parity>
                   ${CMAKE_CURRENT_BINARY_DIR}/gpt2_ref_tiny_fused tiny)
  set_tests_properties(gpt2_parity_tiny_fused PROPERTIES TIMEOUT 900 LABELS "numerics;gpt2" SKIP_RETURN_CODE 77
                                                         ENVIRONMENT "GPT2_PARITY_ARGS=--fused-attention")
endif()
# gpt2_dist against one process (check_dist.sh), each job's whole model saved by sg_dist_save_checkpoint:
# data parallel and micro-batches with ZeRO-1; tensor parallel (2, 2 copies x 2); a pipeline of 4, 2 copies of
# 2 stages and 2 stages x 2 shares of the 4-layer model with its tied embedding, a pipeline of 4 of the untied
# one; and a killed rank healed around in each mode that heals (a build with
# fault injection: SG_INJECT_TESTS). The plain build (a sanitizer build's library does not load into python3).
if(TARGET gpt2_dist AND TARGET sgrt_cli AND NOT SG_SANITIZE)
  foreach(_mode equiv equiv_tp equiv_pp heal heal_pp heal_tp heal_tpdp)
    set(_name gpt2_dist_${_mode})
    if(_mode STREQUAL "heal")
      set(_name gpt2_dist_heal_kill_np4) # its name from before the model modes
    elseif(_mode STREQUAL "heal_tpdp")
      set(_name gpt2_dist_heal_tpdp_kill_np6)
    elseif(_mode MATCHES "^heal_")
      set(_name gpt2_dist_${_mode}_kill_np4)
    endif()
    add_test(NAME ${_name} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_dist.sh ${_mode} $<TARGET_FILE:sgrt_cli>
                                   $<TARGET_FILE:gpt2_dist> /usr/bin/python3 $<TARGET_FILE:sgrt>)
    set_tests_properties(${_name} PROPERTIES TIMEOUT 300 LABELS "gpt2;dist")
    if(_mode MATCHES "^heal")
      # A kill's detection and RTO are timing figures: alone on the machine.
      set_tests_properties(${_name} PROPERTIES LABELS "gpt2;dist;heal" RUN_SERIAL TRUE)
    endif()
  endforeach()
endif()
