# cmake -DHEADER=include/sgrt/sgrt.h -DOUT=example.c -P extract_example.cmake
# Writes the first "@code ... @endcode" block of HEADER's opening comment to
# OUT as a C file: the comment's " * " (or " *" on an empty line) is removed
# from every line. Fails when there is no such block.
file(READ "${HEADER}" text)
string(FIND "${text}" "\n * @code\n" begin)
string(FIND "${text}" "\n * @endcode\n" end)
if(begin LESS 0 OR end LESS begin)
  message(FATAL_ERROR "${HEADER}: no ' * @code' ... ' * @endcode' block")
endif()
string(LENGTH "\n * @code" skip)
math(EXPR begin "${begin} + ${skip}")
math(EXPR length "${end} - ${begin}")
string(SUBSTRING "${text}" ${begin} ${length} code)
string(REPLACE "\n * " "\n" code "${code}")
# Twice: the first pass cannot match two empty lines in a row.
string(REPLACE "\n *\n" "\n\n" code "${code}")
string(REPLACE "\n *\n" "\n\n" code "${code}")
string(REGEX REPLACE "^\n" "" code "${code}")
set(code "// Extracted from ${HEADER} by extract_example.cmake: edit it there.\n${code}\n")
# Rewrite only on change, so an edit elsewhere in the header rebuilds nothing.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL code)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${code}")
