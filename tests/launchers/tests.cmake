# The launchers of docs/dist.md "Launchers" (SPEC M1), beyond `sgrt launch`:
# the data-parallel MLP equivalence test (dist_worker mlp_equiv: DP=N equals
# one process on the whole batch) started by Open MPI's real mpirun, and
# across "nodes" -- network namespaces joined by veth pairs, TCP between them,
# the store on rank 0's node -- with the variables srun, mpirun and torchrun
# set. The namespace tests need root and skip (77) without it.
set(_sg_launch_dir ${CMAKE_CURRENT_BINARY_DIR}/launchers)
file(MAKE_DIRECTORY ${_sg_launch_dir})
add_test(NAME dist_mpirun_np4 COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_mpirun.sh 4 -- $<TARGET_FILE:dist_worker>
                                      mlp_equiv ${_sg_launch_dir}/mpirun)
foreach(style slurm openmpi torchrun sgrt)
  add_test(NAME dist_nodes_${style}_2x2
           COMMAND bash ${PROJECT_SOURCE_DIR}/tests/netns/netns_nodes.sh ${style} 2 2 -- $<TARGET_FILE:dist_worker>
                   mlp_equiv ${_sg_launch_dir}/${style})
  set_tests_properties(dist_nodes_${style}_2x2 PROPERTIES RUN_SERIAL TRUE)
endforeach()
# `sgrt launch --nnodes 2` on each of two namespace nodes runs ResNet-50's data-parallel example; node 0's
# last line of output is the job's JSON summary (4 ranks).
set_tests_properties(dist_mpirun_np4 dist_nodes_slurm_2x2 dist_nodes_openmpi_2x2 dist_nodes_torchrun_2x2
                     dist_nodes_sgrt_2x2
                     PROPERTIES TIMEOUT 150 SKIP_RETURN_CODE 77 LABELS "dist;launchers"
                     ENVIRONMENT "SG_COMM_TIMEOUT_MS=30000;SGRT=$<TARGET_FILE:sgrt_cli>;NETNS_JSON=0")
if(TARGET resnet50_dist) # not in the builds without examples
  add_test(NAME dist_nodes_sgrt_resnet50_2x2
           COMMAND bash ${PROJECT_SOURCE_DIR}/tests/netns/netns_nodes.sh sgrt 2 2 -- $<TARGET_FILE:resnet50_dist>
                   --steps 3 --res 32 --width 8 --batch 2 --json)
  set_tests_properties(dist_nodes_sgrt_resnet50_2x2 PROPERTIES
                       RUN_SERIAL TRUE TIMEOUT 150 SKIP_RETURN_CODE 77 LABELS "dist;launchers"
                       ENVIRONMENT "SG_COMM_TIMEOUT_MS=30000;SGRT=$<TARGET_FILE:sgrt_cli>;NETNS_JSON=1")
endif()
