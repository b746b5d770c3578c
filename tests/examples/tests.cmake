# Examples that produce figures are run with --json and their last line checked.
if(TARGET mlp_train)
  add_test(NAME example_mlp_train
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_mlp_train.sh $<TARGET_FILE:mlp_train>)
  set_tests_properties(example_mlp_train PROPERTIES TIMEOUT 600 LABELS examples)
endif()
