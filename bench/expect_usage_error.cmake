# cmake -DEXE=path/to/ignis -DARGS="a;b" -P expect_usage_error.cmake: passes when `ignis ARGS`
# exits with status 2 and prints a usage message on stderr.
execute_process(COMMAND ${EXE} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "`ignis ${ARGS}` exited with ${rc}, expected 2\n${out}${err}")
endif()
if(NOT err MATCHES "usage: ignis")
  message(FATAL_ERROR "`ignis ${ARGS}` printed no usage on stderr:\n${err}")
endif()
message(STATUS "`ignis ${ARGS}`: exit status 2, ${err}")
