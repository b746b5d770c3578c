# Tensor parallelism (src/parallel/tp.h, docs/tensor_parallel.md): tp_worker runs
# as every rank under `sgrt launch` and compares its TP run with a
# single-process run of the original graph (1e-5 relative, replicated
# parameters bitwise equal across ranks). The two mutant runs drop the
# backward or the forward syncs and pass only if the comparison then fails, so
# the check is known to be able to fail. `badargs` needs no communicator.
add_executable(tp_worker ${CMAKE_CURRENT_LIST_DIR}/tp_worker.c ${CMAKE_CURRENT_LIST_DIR}/compare.c)
target_link_libraries(tp_worker PRIVATE sgrt_internal m)
target_compile_options(tp_worker PRIVATE ${SG_WARNINGS})

set(_sg_tp_launch $<TARGET_FILE:sgrt_cli> launch --label)
set(_sg_tp_worker $<TARGET_FILE:tp_worker>)
add_test(NAME tp_mlp_np2 COMMAND ${_sg_tp_launch} -n 2 -- ${_sg_tp_worker} mlp)
add_test(NAME tp_mlp_np4 COMMAND ${_sg_tp_launch} -n 4 -- ${_sg_tp_worker} mlp)
add_test(NAME tp_matmul_np2 COMMAND ${_sg_tp_launch} -n 2 -- ${_sg_tp_worker} matmul)
# 32-64-64-10: the last layer's logits gathered (2 ways) or its input sliced (4 ways).
add_test(NAME tp_mlp3_np2 COMMAND ${_sg_tp_launch} -n 2 -- ${_sg_tp_worker} mlp3)
add_test(NAME tp_mlp3_np4 COMMAND ${_sg_tp_launch} -n 4 -- ${_sg_tp_worker} mlp3)
# A GPT-2 block: QKV cut by heads (3 blocks), attention computed per head, output row-split.
add_test(NAME tp_attn_np2 COMMAND ${_sg_tp_launch} -n 2 -- ${_sg_tp_worker} attn)
add_test(NAME tp_attn_np4 COMMAND ${_sg_tp_launch} -n 4 -- ${_sg_tp_worker} attn)
add_test(NAME tp_attn_fused_np2 COMMAND ${_sg_tp_launch} -n 2 -- ${_sg_tp_worker} attn_fused)
add_test(NAME tp_mutant_attn_no_forward_sync_np2 COMMAND ${_sg_tp_launch} -n 2 -- ${_sg_tp_worker} attn
                                                         no-forward-sync)
add_test(NAME tp_mutant_mlp3_no_backward_sync_np4 COMMAND ${_sg_tp_launch} -n 4 -- ${_sg_tp_worker} mlp3
                                                          no-backward-sync)
add_test(NAME tp_mutant_no_backward_sync_np2 COMMAND ${_sg_tp_launch} -n 2 -- ${_sg_tp_worker} mlp no-backward-sync)
add_test(NAME tp_mutant_no_forward_sync_np2 COMMAND ${_sg_tp_launch} -n 2 -- ${_sg_tp_worker} mlp no-forward-sync)
add_test(NAME tp_badargs COMMAND ${_sg_tp_worker} badargs)
set_tests_properties(tp_mlp_np2 tp_mlp_np4 tp_matmul_np2 tp_mlp3_np2 tp_mlp3_np4 tp_attn_np2 tp_attn_np4 tp_attn_fused_np2
                     tp_mutant_attn_no_forward_sync_np2
                     tp_mutant_mlp3_no_backward_sync_np4 tp_mutant_no_backward_sync_np2
                     tp_mutant_no_forward_sync_np2 tp_badargs PROPERTIES TIMEOUT 120 LABELS "dist;tp"
                     ENVIRONMENT "SG_COMM_TIMEOUT_MS=30000")
