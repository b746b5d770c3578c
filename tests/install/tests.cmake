# Install test: cmake --install into a temporary prefix, then build and run a
# consumer through find_package(sgrt) and through pkg-config, and run the
# installed sgrt CLI. Sanitizer builds pass their flags on to the consumer.
set(_sg_install_flags "")
if(SG_SANITIZE)
  set(_sg_install_flags "-fsanitize=${SG_SANITIZE} -fno-omit-frame-pointer")
endif()
add_test(NAME install
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_install.sh ${PROJECT_BINARY_DIR}
                 ${CMAKE_CURRENT_LIST_DIR}/consumer ${CMAKE_C_COMPILER} ${CMAKE_GENERATOR}
                 ${CMAKE_INSTALL_LIBDIR} "${_sg_install_flags}")
set_tests_properties(install PROPERTIES TIMEOUT 300 ENVIRONMENT "CMAKE_COMMAND=${CMAKE_COMMAND}")
