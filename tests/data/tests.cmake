# Sample graphs. gen_samples writes tests/data/{mlp,cnn}.sgg (committed: the
# unit and CLI tests read them) and the .sgg fuzzing seeds. After an
# intentional format change, regenerate them with
#   cmake --build build --target sgg_samples
# test_sgg_roundtrip fails while the committed files no longer load or no
# longer hash like freshly built graphs.
set(SG_SAMPLE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/sample_graphs.c ${CMAKE_CURRENT_LIST_DIR}/sgg_edit.c)

add_executable(gen_samples ${CMAKE_CURRENT_LIST_DIR}/gen_samples.c ${SG_SAMPLE_SOURCES})
target_link_libraries(gen_samples PRIVATE sgrt_internal m)
target_compile_options(gen_samples PRIVATE ${SG_WARNINGS})

add_custom_target(sgg_samples
  COMMAND gen_samples ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/sgg
  DEPENDS gen_samples
  COMMENT "Regenerating tests/data/*.sgg and tests/fuzz/corpus/sgg")

# The .sgg tests build the same graphs and edit files with the same editor.
foreach(t test_sgg_roundtrip test_sgg_corrupt test_alloc_fail)
  if(TARGET ${t})
    target_sources(${t} PRIVATE ${SG_SAMPLE_SOURCES})
    target_include_directories(${t} PRIVATE ${CMAKE_CURRENT_LIST_DIR})
    target_link_libraries(${t} PRIVATE m)
  endif()
endforeach()
