# Builds and runs tests/package/consumer against blockattn in one of two ways:
#   cmake -DMODE=install -DBUILD_DIR=<blockattn build> -DWORK=<scratch> -P check_package.cmake
#     installs the build into WORK/prefix, then find_package()s it from there;
#   cmake -DMODE=subdirectory -DSOURCE_DIR=<blockattn source> -DWORK=<scratch> -P check_package.cmake
#     builds the consumer with add_subdirectory(SOURCE_DIR), restricted to one
#     head dim and one block size to keep it quick (the consumer then checks
#     that the library lists only those: BLOCKATTN_HEAD_DIMS and
#     BLOCKATTN_BLOCK_SIZES at work).
cmake_minimum_required(VERSION 3.25)
get_filename_component(CONSUMER ${CMAKE_CURRENT_LIST_DIR}/consumer ABSOLUTE)
file(REMOVE_RECURSE ${WORK})

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()

set(generator "")
find_program(NINJA ninja)
if(NINJA)
  set(generator -G Ninja)
endif()

if(MODE STREQUAL "install")
  run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix)
  foreach(f include/blockattn/blockattn.h include/blockattn/blockattn_c.h)
    if(NOT EXISTS ${WORK}/prefix/${f})
      message(FATAL_ERROR "install did not provide ${f}")
    endif()
  endforeach()
  run(${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK}/build ${generator} -DCMAKE_PREFIX_PATH=${WORK}/prefix)
elseif(MODE STREQUAL "subdirectory")
  run(${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK}/build ${generator} -DBLOCKATTN_SOURCE_DIR=${SOURCE_DIR}
      -DBLOCKATTN_HEAD_DIMS=64 -DBLOCKATTN_BLOCK_SIZES=64)
else()
  message(FATAL_ERROR "MODE must be install or subdirectory")
endif()
# Every core: on a 16-core GPU machine this build took 4 minutes at -j 2.
cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
run(${CMAKE_COMMAND} --build ${WORK}/build -j ${cores})
run(${WORK}/build/consumer)
