# libFuzzer targets (SPEC S2), built when SG_FUZZ is ON (clang; the top-level
# CMakeLists already instruments everything with -fsanitize=fuzzer-no-link).
# Each target is also a CTest test that fuzzes for SG_FUZZ_SECONDS, starting
# from a fresh copy of its seed corpus in the build tree, so that the corpus
# libFuzzer grows never lands in the source tree.
if(SG_FUZZ)
  set(SG_FUZZ_SECONDS 60 CACHE STRING "Seconds each fuzz test runs")

  # sg_add_fuzz_target(NAME SOURCE SEEDS...): SEEDS are directories (their
  # files are copied) or single files.
  function(sg_add_fuzz_target name source)
    add_executable(${name} ${source})
    target_link_libraries(${name} PRIVATE sgrt_internal)
    target_compile_options(${name} PRIVATE ${SG_WARNINGS} -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    set(corpus ${CMAKE_CURRENT_BINARY_DIR}/fuzz/${name}_corpus)
    string(REPLACE ";" "|" seeds "${ARGN}")
    add_test(NAME ${name}_corpus
             COMMAND ${CMAKE_COMMAND} -DDST=${corpus} "-DSEEDS=${seeds}"
                     -P ${PROJECT_SOURCE_DIR}/tests/fuzz/copy_corpus.cmake)
    set_tests_properties(${name}_corpus PROPERTIES FIXTURES_SETUP ${name}_seeds)
    add_test(NAME ${name}
             COMMAND ${name} -max_total_time=${SG_FUZZ_SECONDS} -rss_limit_mb=2048 -timeout=10
                     -print_final_stats=1 ${corpus})
    math(EXPR limit "${SG_FUZZ_SECONDS} + 300")
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED ${name}_seeds TIMEOUT ${limit}
                                            LABELS fuzz)
  endfunction()

  sg_add_fuzz_target(fuzz_sgg_load ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_sgg_load.c
                     ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/sgg
                     ${PROJECT_SOURCE_DIR}/tests/data/mlp.sgg
                     ${PROJECT_SOURCE_DIR}/tests/data/cnn.sgg)
  # Seeds: small torch exports in both forms and hand-written models
  # (written by tests/data/onnx/make_onnx.py).
  sg_add_fuzz_target(fuzz_onnx_import ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_onnx_import.c
                     ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/onnx)
  sg_add_fuzz_target(fuzz_wire_decode ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_wire_decode.c
                     ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/wire)
  # Seeds: a heartbeat and check-ins, hand-made in the layouts of docs/resilience.md
  # (the first byte selects the world size, see the target).
  sg_add_fuzz_target(fuzz_health_decode ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_health_decode.c
                     ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/health)
endif()
