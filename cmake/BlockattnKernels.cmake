# Turns the kernel table (src/kernel_table.cmake) into build inputs:
#   ${out_dir}/blockattn_kernel_table.inc   one BLOCKATTN_KERNEL(...) line per kernel
#   ${out_dir}/kernels/<backend>_<op>_<dtype>_d<D>_b<B>[_rotary].cu   one compile unit per kernel
#   ${out_dir}/blockattn_dense_kernel_table.inc   one BLOCKATTN_DENSE_KERNEL(...) line per dense kernel
#   ${out_dir}/kernels/<backend>_dense_forward_<dtype>_d<D>.cu   one compile unit per dense kernel
#                                                 (its causal and non-causal instantiations)
# Rows are kept when their head dim is in BLOCKATTN_HEAD_DIMS and their block
# size in BLOCKATTN_BLOCK_SIZES (both lists; empty = all), and `manual` rows
# only with BLOCKATTN_MANUAL_KERNELS.
#
# blockattn_generate_kernels(<out_dir> <sm80_sources_var> <sm90_sources_var>)

set(_BLOCKATTN_DTYPE_CPP_bf16 "__nv_bfloat16")
set(_BLOCKATTN_DTYPE_CPP_fp16 "__half")
set(_BLOCKATTN_DTYPE_ENUM_bf16 "BF16")
set(_BLOCKATTN_DTYPE_ENUM_fp16 "FP16")
set(_BLOCKATTN_OP_NAME_forward "Forward")
set(_BLOCKATTN_OP_NAME_backward "Backward")
set(_BLOCKATTN_FUSION_NAME_none "None")
set(_BLOCKATTN_FUSION_NAME_rotary "Rotary")

# Writes `content` to `path` only when it changed, so a reconfigure does not
# rebuild every kernel.
function(_blockattn_write_if_changed path content)
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${content}")
endfunction()

# The steps both tables share; macros, so that they set and append variables
# of blockattn_generate_kernels itself.

# `fields`: the row split on blanks, which must be `count` of them.
macro(_blockattn_split_row row count what)
  string(REGEX REPLACE "[ \t]+" ";" fields "${row}")
  list(LENGTH fields n)
  if(NOT n EQUAL ${count})
    message(FATAL_ERROR "kernel_table.cmake: a ${what} row needs ${count} fields, got '${row}'")
  endif()
endmacro()

# `auto_use`: the core::AutoUse value of a kernel row's `automatic` column.
macro(_blockattn_auto_use automatic)
  if("${automatic}" STREQUAL "auto")
    set(auto_use kAlways)
  elseif("${automatic}" STREQUAL "short")
    set(auto_use kShortBatches)
  elseif("${automatic}" STREQUAL "short-or-fast-memory")
    set(auto_use kShortBatchesOrFastMemory)
  elseif("${automatic}" STREQUAL "except-long-mha-on-slow-memory")
    set(auto_use kExceptLongMhaOnSlowMemory)
  elseif("${automatic}" STREQUAL "16-bit-tables")
    set(auto_use kSixteenBitTables)
  else()
    set(auto_use kNever)
  endif()
endmacro()

# `auto_flag`: the C++ value of a dense row's `automatic` column.
macro(_blockattn_auto_flag automatic)
  if("${automatic}" STREQUAL "auto")
    set(auto_flag true)
  else()
    set(auto_flag false)
  endif()
endmacro()

# `cpp_type`: the C++ element type of a dtype column entry.
macro(_blockattn_cpp_type dtype row)
  set(cpp_type "${_BLOCKATTN_DTYPE_CPP_${dtype}}")
  if(NOT cpp_type)
    message(FATAL_ERROR "kernel_table.cmake: unknown dtype '${dtype}' in '${row}'")
  endif()
endmacro()

# Writes ${out_dir}/kernels/<name>.cu (a comment line, the kernel header, one
# instantiation) and adds it to ${backend}_sources.
macro(_blockattn_add_unit name comment header instantiation)
  set(_cu "// Generated from src/kernel_table.cmake by cmake/BlockattnKernels.cmake: do not edit.\n")
  string(APPEND _cu "// ${comment}\n#include \"${header}\"\n\n${instantiation}\n")
  _blockattn_write_if_changed("${out_dir}/kernels/${name}.cu" "${_cu}")
  list(APPEND ${backend}_sources "${out_dir}/kernels/${name}.cu")
  list(APPEND wanted_files "${out_dir}/kernels/${name}.cu")
endmacro()

function(blockattn_generate_kernels out_dir sm80_var sm90_var)
  include("${PROJECT_SOURCE_DIR}/src/kernel_table.cmake")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               "${PROJECT_SOURCE_DIR}/src/kernel_table.cmake" "${CMAKE_CURRENT_FUNCTION_LIST_FILE}")
  set(inc "// Generated from src/kernel_table.cmake by cmake/BlockattnKernels.cmake: do not edit.\n")
  string(APPEND inc "// BLOCKATTN_KERNEL(backend, Operation, DType, C++ type, head_dim, block_size, AutoUse, Fusion)\n")
  set(sm80_sources "")
  set(sm90_sources "")
  set(wanted_files "")
  foreach(row IN LISTS BLOCKATTN_KERNEL_TABLE)
    _blockattn_split_row("${row}" 7 "kernel")
    list(GET fields 0 backend)
    list(GET fields 1 op)
    list(GET fields 2 head_dim)
    list(GET fields 3 block_size)
    list(GET fields 4 dtypes)
    list(GET fields 5 fusions)
    list(GET fields 6 automatic)
    if(NOT backend MATCHES "^(sm80|sm90)$" OR NOT op MATCHES "^(forward|backward)$" OR
       NOT automatic MATCHES "^(auto|short|short-or-fast-memory|except-long-mha-on-slow-memory|16-bit-tables|manual)$")
      message(FATAL_ERROR "kernel_table.cmake: bad row '${row}'")
    endif()
    if(BLOCKATTN_HEAD_DIMS AND NOT head_dim IN_LIST BLOCKATTN_HEAD_DIMS)
      continue()
    endif()
    if(BLOCKATTN_BLOCK_SIZES AND NOT block_size IN_LIST BLOCKATTN_BLOCK_SIZES)
      continue()
    endif()
    if(automatic STREQUAL "manual" AND NOT BLOCKATTN_MANUAL_KERNELS)
      continue()
    endif()
    _blockattn_auto_use("${automatic}")
    string(REPLACE "," ";" dtypes "${dtypes}")
    string(REPLACE "," ";" fusions "${fusions}")
    foreach(dtype IN LISTS dtypes)
      _blockattn_cpp_type("${dtype}" "${row}")
      foreach(fusion IN LISTS fusions)
        set(fusion_name "${_BLOCKATTN_FUSION_NAME_${fusion}}")
        if(NOT fusion_name)
          message(FATAL_ERROR "kernel_table.cmake: unknown fusion '${fusion}' in '${row}'")
        endif()
        set(op_name "${_BLOCKATTN_OP_NAME_${op}}")
        string(APPEND inc "BLOCKATTN_KERNEL(${backend}, ${op_name}, ${_BLOCKATTN_DTYPE_ENUM_${dtype}}, ${cpp_type}, "
                          "${head_dim}, ${block_size}, ${auto_use}, ${fusion_name})\n")
        set(name "${backend}_${op}_${dtype}_d${head_dim}_b${block_size}")
        if(NOT fusion STREQUAL "none")
          string(APPEND name "_${fusion}")
        endif()
        _blockattn_add_unit("${name}"
          "${backend} ${op} kernel, ${dtype}, head_dim ${head_dim}, block_size ${block_size}, fusion ${fusion}."
          "${backend}/${op}_kernel.cuh"
          "BLOCKATTN_INSTANTIATE_KERNEL(blockattn::${backend}::Params, ${op_name}, ${cpp_type}, ${head_dim}, ${block_size}, blockattn::core::Fusion::k${fusion_name})")
      endforeach()
    endforeach()
  endforeach()
  # The dense forward's table: no block size, and each kernel is built
  # causal and non-causal.
  set(dense_inc "// Generated from src/kernel_table.cmake by cmake/BlockattnKernels.cmake: do not edit.\n")
  string(APPEND dense_inc "// BLOCKATTN_DENSE_KERNEL(backend, DType, C++ type, head_dim, automatic)\n")
  set(dense_rows 0)
  foreach(row IN LISTS BLOCKATTN_DENSE_KERNEL_TABLE)
    _blockattn_split_row("${row}" 4 "dense")
    list(GET fields 0 backend)
    list(GET fields 1 head_dim)
    list(GET fields 2 dtypes)
    list(GET fields 3 automatic)
    if(NOT backend MATCHES "^(sm80|sm90)$" OR NOT automatic MATCHES "^(auto|manual)$")
      message(FATAL_ERROR "kernel_table.cmake: bad dense row '${row}'")
    endif()
    if(BLOCKATTN_HEAD_DIMS AND NOT head_dim IN_LIST BLOCKATTN_HEAD_DIMS)
      continue()
    endif()
    if(automatic STREQUAL "manual" AND NOT BLOCKATTN_MANUAL_KERNELS)
      continue()
    endif()
    _blockattn_auto_flag("${automatic}")
    string(REPLACE "," ";" dtypes "${dtypes}")
    foreach(dtype IN LISTS dtypes)
      _blockattn_cpp_type("${dtype}" "${row}")
      string(APPEND dense_inc "BLOCKATTN_DENSE_KERNEL(${backend}, ${_BLOCKATTN_DTYPE_ENUM_${dtype}}, ${cpp_type}, "
                              "${head_dim}, ${auto_flag})\n")
      _blockattn_add_unit("${backend}_dense_forward_${dtype}_d${head_dim}"
        "${backend} dense forward kernel, ${dtype}, head_dim ${head_dim}, causal and not."
        "${backend}/dense_forward_kernel.cuh"
        "BLOCKATTN_INSTANTIATE_DENSE_KERNEL(blockattn::${backend}::DenseParams, ${cpp_type}, ${head_dim})")
      math(EXPR dense_rows "${dense_rows} + 1")
    endforeach()
  endforeach()
  if(dense_rows EQUAL 0)  # the dense API then reports every problem as not built
    message(STATUS "blockattn: BLOCKATTN_HEAD_DIMS='${BLOCKATTN_HEAD_DIMS}' has no dense kernel "
                   "(BLOCKATTN_DENSE_KERNEL_TABLE, src/kernel_table.cmake)")
  endif()
  _blockattn_write_if_changed("${out_dir}/blockattn_dense_kernel_table.inc" "${dense_inc}")

  # Drop compile units of rows that left the table or the filters.
  file(GLOB stale "${out_dir}/kernels/*.cu")
  foreach(f IN LISTS stale)
    if(NOT f IN_LIST wanted_files)
      file(REMOVE "${f}")
    endif()
  endforeach()
  if(NOT sm80_sources AND NOT sm90_sources)
    message(FATAL_ERROR "BLOCKATTN_HEAD_DIMS='${BLOCKATTN_HEAD_DIMS}' and BLOCKATTN_BLOCK_SIZES="
                        "'${BLOCKATTN_BLOCK_SIZES}' leave no kernel of src/kernel_table.cmake")
  endif()
  _blockattn_write_if_changed("${out_dir}/blockattn_kernel_table.inc" "${inc}")
  set(${sm80_var} "${sm80_sources}" PARENT_SCOPE)
  set(${sm90_var} "${sm90_sources}" PARENT_SCOPE)
endfunction()
