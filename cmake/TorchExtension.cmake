# blockattn._ext, the Python package's eager fast path (python/csrc/fast_path.cpp).
#
# Optional: built when a Python interpreter with PyTorch is found (or asked
# for with -DBLOCKATTN_TORCH_EXTENSION=ON), next to libblockattn.so, for that
# torch version only. The package works without it (ctypes over the C ABI),
# and the C++ library never depends on it. Torch's own CMake package is not
# used: what the module needs (include and library paths, the C++ ABI flag,
# the module suffix) is asked from torch.utils.cpp_extension directly.
set(BLOCKATTN_TORCH_EXTENSION AUTO CACHE STRING "Build the PyTorch fast-path module blockattn._ext: AUTO, ON or OFF")
set_property(CACHE BLOCKATTN_TORCH_EXTENSION PROPERTY STRINGS AUTO ON OFF)

function(blockattn_torch_extension)
  if(BLOCKATTN_TORCH_EXTENSION STREQUAL "OFF")
    return()
  endif()
  # The first python3 on PATH (a virtualenv's, when it is there), unless
  # -DBLOCKATTN_PYTHON=... names one.
  find_program(BLOCKATTN_PYTHON NAMES python3 python)
  set(query [=[
import sysconfig, torch
from torch.utils import cpp_extension as ext
print(";".join(["|".join(ext.include_paths()), "|".join(ext.library_paths()), sysconfig.get_paths()["include"],
                sysconfig.get_config_var("EXT_SUFFIX"), str(int(torch._C._GLIBCXX_USE_CXX11_ABI)), torch.__version__]))
]=])
  set(found FALSE)
  if(BLOCKATTN_PYTHON)
    execute_process(COMMAND ${BLOCKATTN_PYTHON} -c "${query}" OUTPUT_VARIABLE info RESULT_VARIABLE rc
                    ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0)
      list(LENGTH info fields)
      if(fields EQUAL 6)
        set(found TRUE)
      endif()
    endif()
  endif()
  if(NOT found)
    if(BLOCKATTN_TORCH_EXTENSION STREQUAL "ON")
      message(FATAL_ERROR "BLOCKATTN_TORCH_EXTENSION=ON but ${BLOCKATTN_PYTHON} cannot import torch (set BLOCKATTN_PYTHON)")
    endif()
    message(STATUS "blockattn: no torch in ${BLOCKATTN_PYTHON}; the Python package will use its ctypes route only")
    return()
  endif()
  list(GET info 0 torch_includes)
  list(GET info 1 torch_lib_dirs)
  list(GET info 2 python_include)
  list(GET info 3 module_suffix)
  list(GET info 4 cxx11_abi)
  list(GET info 5 torch_version)
  string(REPLACE "|" ";" torch_includes "${torch_includes}")
  string(REPLACE "|" ";" torch_lib_dirs "${torch_lib_dirs}")
  set(torch_libs)
  foreach(name c10 c10_cuda torch torch_cpu torch_cuda torch_python)
    find_library(BLOCKATTN_TORCH_LIB_${name} ${name} PATHS ${torch_lib_dirs} NO_DEFAULT_PATH)
    if(NOT BLOCKATTN_TORCH_LIB_${name})
      message(FATAL_ERROR "blockattn: torch ${torch_version} has no lib${name} in ${torch_lib_dirs}")
    endif()
    list(APPEND torch_libs ${BLOCKATTN_TORCH_LIB_${name}})
  endforeach()

  add_library(blockattn_torch_ext MODULE python/csrc/fast_path.cpp)
  target_include_directories(blockattn_torch_ext SYSTEM PRIVATE ${torch_includes} ${python_include})
  target_link_libraries(blockattn_torch_ext PRIVATE blockattn ${torch_libs} CUDA::toolkit)
  target_compile_definitions(blockattn_torch_ext PRIVATE TORCH_EXTENSION_NAME=_ext TORCH_API_INCLUDE_EXTENSION_H
                             _GLIBCXX_USE_CXX11_ABI=${cxx11_abi} BLOCKATTN_TORCH_VERSION="${torch_version}")
  target_compile_options(blockattn_torch_ext PRIVATE -Wall -Wextra)
  # Loaded from the package directory or the build directory, where
  # libblockattn.so lies beside it (and is already loaded by blockattn._lib).
  set_target_properties(blockattn_torch_ext PROPERTIES
    PREFIX "" OUTPUT_NAME _ext SUFFIX "${module_suffix}"
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    BUILD_RPATH "$ORIGIN" INSTALL_RPATH "$ORIGIN")
  message(STATUS "blockattn: building blockattn._ext for torch ${torch_version}")
endfunction()

blockattn_torch_extension()
