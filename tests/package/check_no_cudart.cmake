# The shared library must not need a CUDA runtime at run time (it carries it
# statically), only the driver, which it loads itself:
#   cmake -DLIBRARY=<libblockattn.so> -DOBJDUMP=<objdump> -P check_no_cudart.cmake
execute_process(COMMAND ${OBJDUMP} -p ${LIBRARY} OUTPUT_VARIABLE headers RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${OBJDUMP} -p ${LIBRARY} failed")
endif()
string(REGEX MATCHALL "NEEDED +[^\n]+" needed "${headers}")
message(STATUS "${LIBRARY}: ${needed}")
if(NOT needed)
  message(FATAL_ERROR "no NEEDED entries found: is ${LIBRARY} a shared library?")
endif()
if(needed MATCHES "libcudart|libcuda\\.so")
  message(FATAL_ERROR "${LIBRARY} links a CUDA runtime or the driver dynamically: ${needed}")
endif()
