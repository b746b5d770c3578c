# Pipeline parallelism (src/parallel/pp.h, docs/pipeline_parallel.md): pp_worker
# runs as every rank (rank k = stage k) under `sgrt launch` and compares each
# stage's parameters and the losses with a single-process run of the whole
# batch (1e-5 relative). `res` sends two boundary tensors of one shape through
# a non-symmetric op, so a swap would fail it (2 ranks), and relays one through
# a stage that does not read it (4 ranks); the M variants cover M < K-1
# (warm-up only), M = K and one-row micro-batches. `corrupt` feeds stage 1
# malformed boundary messages, each of which must be rejected. `badargs` needs no
# communicator: argument checks, allocation failures, and a deadlock and
# dependency simulation of every 1F1B program for K <= 8, M <= 12.
add_executable(pp_worker ${CMAKE_CURRENT_LIST_DIR}/pp_worker.c ${CMAKE_CURRENT_LIST_DIR}/pp_equiv.c
                         ${CMAKE_CURRENT_LIST_DIR}/compare.c ${CMAKE_CURRENT_LIST_DIR}/dist_models.c
                         ${PROJECT_SOURCE_DIR}/examples/resnet50/resnet50_model.c)
target_link_libraries(pp_worker PRIVATE sgrt_internal m)
target_compile_options(pp_worker PRIVATE ${SG_WARNINGS})

set(_sg_pp_launch $<TARGET_FILE:sgrt_cli> launch --label)
set(_sg_pp_worker $<TARGET_FILE:pp_worker>)
add_test(NAME pp_mlp_np2 COMMAND ${_sg_pp_launch} -n 2 -- ${_sg_pp_worker} mlp)
add_test(NAME pp_mlp_np4 COMMAND ${_sg_pp_launch} -n 4 -- ${_sg_pp_worker} mlp)
add_test(NAME pp_mlp_np3 COMMAND ${_sg_pp_launch} -n 3 -- ${_sg_pp_worker} mlp)
add_test(NAME pp_mlp_m2_np4 COMMAND ${_sg_pp_launch} -n 4 -- ${_sg_pp_worker} mlp 2)
add_test(NAME pp_mlp_m16_np2 COMMAND ${_sg_pp_launch} -n 2 -- ${_sg_pp_worker} mlp 16)
add_test(NAME pp_res_np2 COMMAND ${_sg_pp_launch} -n 2 -- ${_sg_pp_worker} res)
add_test(NAME pp_res_np4 COMMAND ${_sg_pp_launch} -n 4 -- ${_sg_pp_worker} res)
add_test(NAME pp_metis_np2 COMMAND ${_sg_pp_launch} -n 2 -- ${_sg_pp_worker} metis)
add_test(NAME pp_corrupt_np2 COMMAND ${_sg_pp_launch} -n 2 -- ${_sg_pp_worker} corrupt)
add_test(NAME pp_badargs COMMAND ${_sg_pp_worker} badargs)
set_tests_properties(pp_mlp_np2 pp_mlp_np4 pp_mlp_np3 pp_mlp_m2_np4 pp_mlp_m16_np2 pp_res_np2 pp_res_np4
                     pp_metis_np2 pp_corrupt_np2 pp_badargs PROPERTIES TIMEOUT 120 LABELS "dist;pp" ENVIRONMENT "SG_COMM_TIMEOUT_MS=30000")

# Pipeline x data parallelism, batch norm and dropout (pp_equiv.c): `equiv
# MODEL D M` runs K = ranks/D stages times D replicas (rank = replica*K +
# stage) for 5 steps and compares every stage's parameters and running
# statistics, and the losses, with one process accumulating the same D*M
# micro-batches (same dropout streams) in the whole graph: 1e-4 relative,
# and the replicas of a stage bitwise equal. `drop` is the MLP with dropout
# after the first two relus; `resnet` is ResNet-50 at 32x32, bottleneck width
# 16, 10 classes, global batch 16 (batch norm in training form), cut at
# residual block ends.
add_test(NAME pp_dp_mlp_np4 COMMAND ${_sg_pp_launch} -n 4 -- ${_sg_pp_worker} equiv mlp 2 2)
add_test(NAME pp_drop_np4 COMMAND ${_sg_pp_launch} -n 4 -- ${_sg_pp_worker} equiv drop 1 4)
add_test(NAME pp_dp_drop_np4 COMMAND ${_sg_pp_launch} -n 4 -- ${_sg_pp_worker} equiv drop 2 2)
add_test(NAME pp_dp3_drop_np6 COMMAND ${_sg_pp_launch} -n 6 -- ${_sg_pp_worker} equiv drop 3 2 blocks 24)
add_test(NAME pp_resnet_np4 COMMAND ${_sg_pp_launch} -n 4 -- ${_sg_pp_worker} equiv resnet 1 4)
add_test(NAME pp_dp_resnet_np4 COMMAND ${_sg_pp_launch} -n 4 -- ${_sg_pp_worker} equiv resnet 2 2)
# The same with the partitioner's stages, which cut through bottlenecks and put
# a batch norm right after a cut (it reads a received, plain-stored tensor).
add_test(NAME pp_resnet_metis_np4 COMMAND ${_sg_pp_launch} -n 4 -- ${_sg_pp_worker} equiv resnet 1 4 metis)
set_tests_properties(pp_dp_mlp_np4 pp_drop_np4 pp_dp_drop_np4 pp_dp3_drop_np6 pp_resnet_np4 pp_dp_resnet_np4
                     pp_resnet_metis_np4
                     PROPERTIES TIMEOUT 120 LABELS "dist;pp" ENVIRONMENT "SG_COMM_TIMEOUT_MS=60000")

# Weights tied across stages (pp_tied.c): a net whose token embedding is also
# its output layer, as GPT-2's, cut so that the embedding is read on the first
# and the last stage; every parameter against one process at 1e-5 and the two
# copies of the embedding bitwise equal, through 2 and 3 stages with
# micro-batches and 2 copies of a 2-stage pipeline. The mutant forgets the
# tied weight (no gradient sum) and passes only if the comparison then fails.
add_executable(pp_tied_worker ${CMAKE_CURRENT_LIST_DIR}/pp_tied.c ${CMAKE_CURRENT_LIST_DIR}/compare.c)
target_link_libraries(pp_tied_worker PRIVATE sgrt_internal m)
target_compile_options(pp_tied_worker PRIVATE ${SG_WARNINGS})
set(_sg_pp_tied $<TARGET_FILE:pp_tied_worker>)
add_test(NAME pp_tied_np2 COMMAND ${_sg_pp_launch} -n 2 -- ${_sg_pp_tied} 1 4)
add_test(NAME pp_tied_np3 COMMAND ${_sg_pp_launch} -n 3 -- ${_sg_pp_tied} 1 3)
add_test(NAME pp_tied_dp2_np4 COMMAND ${_sg_pp_launch} -n 4 -- ${_sg_pp_tied} 2 2)
add_test(NAME pp_mutant_tied_no_sum_np3 COMMAND ${_sg_pp_launch} -n 3 -- ${_sg_pp_tied} 1 2 no-tied-sum)
set_tests_properties(pp_tied_np2 pp_tied_np3 pp_tied_dp2_np4 pp_mutant_tied_no_sum_np3
                     PROPERTIES TIMEOUT 120 LABELS "dist;pp" ENVIRONMENT "SG_COMM_TIMEOUT_MS=30000")
# ... and through sg_dist_create_model with a re-cut from the profile (rank 1 slowed 4x): the tied weight
# stays on the first stage, its second copy and momentum follow the logits layer to its new stage.
add_test(NAME pp_tied_recut_np3 COMMAND ${_sg_pp_launch} -n 3 -- ${_sg_pp_tied} recut)
set_tests_properties(pp_tied_recut_np3 PROPERTIES TIMEOUT 120 LABELS "dist;pp" ENVIRONMENT "SG_COMM_TIMEOUT_MS=30000")
