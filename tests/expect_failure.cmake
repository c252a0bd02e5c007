# cmake "-DCMD=mpirun;-np;2;prog;args" -P expect_failure.cmake: runs CMD (at most 90 s) and
# passes it on only when it exits non-zero; prints "exit status N" and its output for ctest's
# PASS_REGULAR_EXPRESSION.
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 90)
if(rc EQUAL 0)
  message(FATAL_ERROR "`${CMD}` exited with status 0, expected a failure\n${out}${err}")
endif()
message(STATUS "exit status ${rc}\n${out}${err}")
