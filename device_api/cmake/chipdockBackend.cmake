# chipdock backend kit: build a backend library and its manifest out of tree.
#
# chipdock_add_backend(<target>
#     SOURCES <src>...               .c files build as C99, .cpp as C++17
#     [NAME <name>]                  backend name (default: <target>); the
#                                    table's `name` must say the same
#     [DEVICE_TYPE <type>]           default: <name>
#     [VERSION <version>]            the backend's own version
#                                    (default: PROJECT_VERSION, else 0.0.0)
#     [VENDOR_RUNTIME <name>] [RUNTIME_VERSION <version>]
#     [DRIVER <name>] [DRIVER_MIN_VERSION <version>]
#     [UNSUPPORTED_FILES <json>...]  files each holding a JSON array of the
#                                    manifest's "unsupported" entries
#                                    ({"op", "dtypes", "reason"}), joined in
#                                    order (one file per kernel family); each
#                                    entry is checked against the opset the
#                                    kit ships (../opset/opset.yaml): an op
#                                    or dtype that does not exist, a missing
#                                    reason or an unknown key fails the
#                                    configure naming the file and the entry
#                                    (needs CMake >= 3.19; older ones warn)
#     [ENVIRONMENT <NAME=VALUE>...]) defaults the core puts into the process
#                                    environment before it opens the library,
#                                    each only where NAME is unset (for the
#                                    libraries the backend loads with it, e.g.
#                                    OMP_WAIT_POLICY=PASSIVE for OpenMP)
#
#   Creates a MODULE library that links chipdock::device_api, hides every
#   symbol (-fvisibility=hidden plus the linker script chipdock_plugin.map) so
#   that only `chipdock_plugin_entry` is exported, and writes the manifest
#   <name>.chipdock.json next to the built library (schema:
#   device_api/docs/manifest.md). Options not given are written as null.
#   The manifest also records the chipdock core version and the opset version
#   this kit belongs to (`core_version`, `opset_version`; chipdockBuiltWith.cmake).
#
# chipdock_install_backend(<target> DESTINATION <dir> [COMPONENT <component>])
#
#   Installs the library and its manifest side by side into <dir>.
#
# chipdock_use_compiler_cache()
#
#   Compiles the targets made after it through ccache when ccache is on PATH
#   (and CHIPDOCK_CCACHE is not OFF, and no launcher is set already): a
#   rebuild of unchanged sources, in another build folder too, costs nothing.
#
# chipdock_sanitize(<target>...)
#
#   Builds the targets with the sanitizers named in the cache variable
#   CHIPDOCK_SANITIZE (a comma- or semicolon-separated list: address,
#   undefined, leak, thread; empty, the default, builds without). Compile and
#   link flags alike, with frame pointers kept so reports have stacks.
#   chipdock_add_backend() calls it on every backend, and the core's build on
#   its own targets, so `-DCHIPDOCK_SANITIZE=address,undefined` builds the
#   whole stack the same way. UBSan keeps going after a report; set
#   UBSAN_OPTIONS=halt_on_error=1 to stop at the first (.ci/sanitize does).
#
# Needs CMake >= 3.17; include it through find_package(chipdock).

set(CHIPDOCK_SANITIZE "" CACHE STRING
    "Sanitizers to build with, e.g. address,undefined (empty: none)")

function(chipdock_sanitize)
  if(CHIPDOCK_SANITIZE STREQUAL "")
    return()
  endif()
  string(REPLACE "," ";" _names "${CHIPDOCK_SANITIZE}")
  foreach(_name IN LISTS _names)
    if(NOT _name MATCHES "^(address|undefined|leak|thread)$")
      message(FATAL_ERROR "CHIPDOCK_SANITIZE: unknown sanitizer '${_name}' "
                          "(expected a list of address, undefined, leak, thread)")
    endif()
  endforeach()
  list(JOIN _names "," _flag)
  foreach(_target IN LISTS ARGN)
    target_compile_options(${_target} PRIVATE "-fsanitize=${_flag}" -fno-omit-frame-pointer -g)
    target_link_options(${_target} PRIVATE "-fsanitize=${_flag}")
  endforeach()
endfunction()

function(_chipdock_json_value out value)
  if(value STREQUAL "")
    set(${out} "null" PARENT_SCOPE)
    return()
  endif()
  if(value MATCHES "\\$<")
    message(FATAL_ERROR "chipdock_add_backend: '${value}' must not contain a generator expression")
  endif()
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\"" "\\\"" value "${value}")
  set(${out} "\"${value}\"" PARENT_SCOPE)
endfunction()

# The op names and dtype names of the opset the kit ships (ops: the keys
# under `ops:`, plus the core's own `copy`; dtypes: the `all` group), read once per configure into
# _chipdock_opset_ops / _chipdock_opset_dtypes (global properties).
function(_chipdock_opset_vocabulary where)
  get_property(_done GLOBAL PROPERTY _chipdock_opset_read)
  if(_done)
    return()
  endif()
  get_filename_component(_yaml "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../opset/opset.yaml" ABSOLUTE)
  if(NOT EXISTS "${_yaml}")
    message(FATAL_ERROR "${where}: the kit's opset ${_yaml} is missing, so UNSUPPORTED_FILES cannot be checked "
                        "(a broken chipdock install: reinstall the chipdock wheel)")
  endif()
  file(STRINGS "${_yaml}" _lines)
  set(_ops "")
  set(_dtypes "")
  set(_in_ops FALSE)
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^ops:")
      set(_in_ops TRUE)
    elseif(_line MATCHES "^[A-Za-z_]")
      set(_in_ops FALSE)
    endif()
    if(_in_ops AND _line MATCHES "^  ([a-z_][a-z0-9_]*):[ ]*$")
      list(APPEND _ops "${CMAKE_MATCH_1}")
    elseif(_line MATCHES "^  all: *\\[([a-z0-9_, ]*)\\]")
      string(REPLACE "," ";" _all "${CMAKE_MATCH_1}")
      foreach(_d IN LISTS _all)
        string(STRIP "${_d}" _d)
        list(APPEND _dtypes "${_d}")
      endforeach()
    endif()
  endforeach()
  list(APPEND _ops copy)  # the core's own op (strided copies), not in the opset
  if(NOT _ops OR NOT _dtypes)
    message(FATAL_ERROR "${where}: cannot read the op names (under `ops:`) and dtype names (the `all` dtype "
                        "group) from ${_yaml}")
  endif()
  set_property(GLOBAL PROPERTY _chipdock_opset_ops "${_ops}")
  set_property(GLOBAL PROPERTY _chipdock_opset_dtypes "${_dtypes}")
  set_property(GLOBAL PROPERTY _chipdock_opset_file "${_yaml}")
  set_property(GLOBAL PROPERTY _chipdock_opset_read TRUE)
endfunction()

# Checks every entry of one UNSUPPORTED_FILES array (`text`, valid JSON):
# an object with only the keys op, dtypes, reason; `op` an op of the opset
# or `copy`;
# `reason` a non-empty string; `dtypes` (optional) an array of dtype names or
# of coverage labels (dtype names joined by "-", e.g. "float32-bool").
function(_chipdock_check_unsupported target file text)
  set(_where "chipdock_add_backend(${target}): ${file}")
  _chipdock_opset_vocabulary("${_where}")
  get_property(_ops GLOBAL PROPERTY _chipdock_opset_ops)
  get_property(_dtypes GLOBAL PROPERTY _chipdock_opset_dtypes)
  get_property(_yaml GLOBAL PROPERTY _chipdock_opset_file)
  string(JSON _count LENGTH "${text}")
  if(_count EQUAL 0)
    return()
  endif()
  math(EXPR _last "${_count} - 1")
  foreach(_i RANGE ${_last})
    string(JSON _entry GET "${text}" ${_i})
    string(JSON _type TYPE "${text}" ${_i})
    set(_at "${_where}: entry ${_i}")
    if(NOT _type STREQUAL "OBJECT")
      message(FATAL_ERROR "${_at} is not an object {\"op\", \"dtypes\", \"reason\"}")
    endif()
    string(JSON _keys LENGTH "${_entry}")
    set(_has_op FALSE)
    set(_has_reason FALSE)
    if(_keys GREATER 0)
      math(EXPR _klast "${_keys} - 1")
      foreach(_k RANGE ${_klast})
        string(JSON _key MEMBER "${_entry}" ${_k})
        if(NOT _key MATCHES "^(op|dtypes|reason)$")
          message(FATAL_ERROR "${_at}: unknown key \"${_key}\" (an entry has only \"op\", \"dtypes\" "
                              "and \"reason\")")
        endif()
      endforeach()
    endif()
    string(JSON _op ERROR_VARIABLE _e GET "${_entry}" op)
    string(JSON _op_type ERROR_VARIABLE _e TYPE "${_entry}" op)
    if(_e OR NOT _op_type STREQUAL "STRING")
      message(FATAL_ERROR "${_at}: \"op\" must be a string naming an op of the opset")
    endif()
    set(_at "${_at} (op \"${_op}\")")
    if(NOT _op IN_LIST _ops)
      message(FATAL_ERROR "${_at}: \"${_op}\" is not an op of the opset (${_yaml}); "
                          "op names are the keys under `ops:` there, e.g. add, matmul, conv2d")
    endif()
    string(JSON _reason ERROR_VARIABLE _e GET "${_entry}" reason)
    string(JSON _reason_type ERROR_VARIABLE _e2 TYPE "${_entry}" reason)
    string(STRIP "${_reason}" _reason)
    if(_e OR NOT _reason_type STREQUAL "STRING" OR _reason STREQUAL "")
      message(FATAL_ERROR "${_at}: \"reason\" must be a non-empty string saying why ${_op} is "
                          "unsupported")
    endif()
    string(JSON _dt_type ERROR_VARIABLE _e TYPE "${_entry}" dtypes)
    if(_e)
      continue()  # no dtypes: every signature of the op
    endif()
    if(NOT _dt_type STREQUAL "ARRAY")
      message(FATAL_ERROR "${_at}: \"dtypes\" must be an array of dtype names")
    endif()
    string(JSON _n LENGTH "${_entry}" dtypes)
    if(_n EQUAL 0)
      continue()
    endif()
    math(EXPR _nlast "${_n} - 1")
    foreach(_j RANGE ${_nlast})
      string(JSON _d GET "${_entry}" dtypes ${_j})
      string(JSON _d_type TYPE "${_entry}" dtypes ${_j})
      if(NOT _d_type STREQUAL "STRING")
        message(FATAL_ERROR "${_at}: dtypes[${_j}] must be a string")
      endif()
      string(REPLACE "-" ";" _parts "${_d}")
      if(_d STREQUAL "" OR _d MATCHES "(^-|-$|--)")
        set(_parts "")
      endif()
      list(JOIN _dtypes ", " _known)
      if(NOT _parts)
        message(FATAL_ERROR "${_at}: \"${_d}\" is not a chipdock dtype (one of ${_known}) nor a "
                            "coverage label (dtype names joined by \"-\", e.g. \"float32-bool\")")
      endif()
      list(LENGTH _parts _nparts)
      foreach(_part IN LISTS _parts)
        if(NOT _part IN_LIST _dtypes AND _nparts EQUAL 1)
          message(FATAL_ERROR "${_at}: \"${_d}\" is not a chipdock dtype (one of ${_known})")
        elseif(NOT _part IN_LIST _dtypes)
          message(FATAL_ERROR "${_at}: \"${_d}\" names \"${_part}\", which is not a chipdock dtype "
                              "(one of ${_known}); a coverage label joins dtype names with \"-\", e.g. "
                              "\"float32-bool\"")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()

function(chipdock_add_backend target)
  cmake_parse_arguments(PARSE_ARGV 1 arg ""
    "NAME;DEVICE_TYPE;VERSION;VENDOR_RUNTIME;RUNTIME_VERSION;DRIVER;DRIVER_MIN_VERSION"
    "SOURCES;ENVIRONMENT;UNSUPPORTED_FILES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "chipdock_add_backend(${target}): unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "chipdock_add_backend(${target}): SOURCES is required")
  endif()
  if(NOT TARGET chipdock::device_api)
    message(FATAL_ERROR "chipdock_add_backend(${target}): call find_package(chipdock) first")
  endif()

  if(NOT arg_NAME)
    set(arg_NAME "${target}")
  endif()
  if(NOT arg_DEVICE_TYPE)
    set(arg_DEVICE_TYPE "${arg_NAME}")
  endif()
  if(NOT arg_VERSION)
    if(PROJECT_VERSION)
      set(arg_VERSION "${PROJECT_VERSION}")
    else()
      set(arg_VERSION "0.0.0")
    endif()
  endif()
  foreach(_field NAME DEVICE_TYPE)
    if(NOT arg_${_field} MATCHES "^[A-Za-z0-9][A-Za-z0-9_.-]*$")
      message(FATAL_ERROR "chipdock_add_backend(${target}): ${_field} '${arg_${_field}}' "
                          "must match [A-Za-z0-9][A-Za-z0-9_.-]* (it names files)")
    endif()
  endforeach()
  if(arg_RUNTIME_VERSION AND NOT arg_VENDOR_RUNTIME)
    message(FATAL_ERROR "chipdock_add_backend(${target}): RUNTIME_VERSION needs VENDOR_RUNTIME")
  endif()
  if(arg_DRIVER_MIN_VERSION AND NOT arg_DRIVER)
    message(FATAL_ERROR "chipdock_add_backend(${target}): DRIVER_MIN_VERSION needs DRIVER")
  endif()

  # The ABI version the backend is built against, from the headers it uses.
  include("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/chipdockAbiVersion.cmake")
  if(_chipdock_abi_major STREQUAL "")
    message(FATAL_ERROR "chipdock_add_backend(${target}): cannot read the ABI version from ${_chipdock_abi_header}")
  endif()

  # The core and opset versions it is built against (chipdockBuiltWith.cmake): the manifest records them so
  # that `chipdock doctor` can compare them with what is installed and the dispatcher never hands the backend
  # an attribute newer than its opset.
  include("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/chipdockBuiltWith.cmake")
  _chipdock_json_value(_j_CORE_VERSION "${_chipdock_core_version}")
  if(_chipdock_opset_version STREQUAL "")
    set(_chipdock_opset_version "null")
  endif()

  add_library(${target} MODULE ${arg_SOURCES})
  target_link_libraries(${target} PRIVATE chipdock::device_api)
  chipdock_sanitize(${target})
  set_target_properties(${target} PROPERTIES
    C_STANDARD 99
    C_STANDARD_REQUIRED ON
    C_EXTENSIONS OFF
    CXX_STANDARD 17
    CXX_STANDARD_REQUIRED ON
    CXX_EXTENSIONS OFF
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    CHIPDOCK_BACKEND_NAME "${arg_NAME}")

  # Export exactly one symbol. Hidden visibility does most of it; the linker
  # script also hides what static libraries linked into the backend export.
  set(_map "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/chipdock_plugin.map")
  if(APPLE)
    target_link_options(${target} PRIVATE "LINKER:-exported_symbol,_chipdock_plugin_entry")
  elseif(NOT WIN32)  # on Windows, CD_EXPORT (dllexport) is the whole export list
    target_link_options(${target} PRIVATE "LINKER:--version-script=${_map}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${_map}")
  endif()

  foreach(_field NAME DEVICE_TYPE VERSION VENDOR_RUNTIME RUNTIME_VERSION DRIVER DRIVER_MIN_VERSION)
    _chipdock_json_value(_j_${_field} "${arg_${_field}}")
  endforeach()
  set(_environment "")
  foreach(_pair IN LISTS arg_ENVIRONMENT)
    if(NOT _pair MATCHES "^([A-Za-z_][A-Za-z0-9_]*)=(.+)$")
      message(FATAL_ERROR "chipdock_add_backend(${target}): ENVIRONMENT entry '${_pair}' is not NAME=VALUE "
                          "(a non-empty VALUE)")
    endif()
    _chipdock_json_value(_key "${CMAKE_MATCH_1}")
    _chipdock_json_value(_value "${CMAKE_MATCH_2}")
    if(_environment)
      string(APPEND _environment ", ")
    endif()
    string(APPEND _environment "${_key}: ${_value}")
  endforeach()
  if(_environment)
    set(_environment ",\n  \"environment\": {${_environment}}")
  endif()
  set(_unsupported "")
  foreach(_file IN LISTS arg_UNSUPPORTED_FILES)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_file}")
    file(READ "${_file}" _text)
    string(STRIP "${_text}" _text)
    if(NOT _text MATCHES "^\\[(.*)\\]$")
      message(FATAL_ERROR "chipdock_add_backend(${target}): ${_file} does not hold a JSON array")
    endif()
    string(STRIP "${CMAKE_MATCH_1}" _entries)
    if(NOT CMAKE_VERSION VERSION_LESS 3.19)
      string(JSON _count ERROR_VARIABLE _json_error LENGTH "${_text}")
      if(_json_error)
        message(FATAL_ERROR "chipdock_add_backend(${target}): ${_file}: ${_json_error}")
      endif()
      _chipdock_check_unsupported("${target}" "${_file}" "${_text}")
    elseif(NOT _chipdock_warned_unchecked)
      set(_chipdock_warned_unchecked TRUE)
      message(WARNING "chipdock_add_backend(${target}): CMake ${CMAKE_VERSION} has no string(JSON); the entries "
                      "of UNSUPPORTED_FILES are not checked against the opset (CMake >= 3.19 checks them)")
    endif()
    if(_entries STREQUAL "")
      continue()
    endif()
    if(_unsupported)
      string(APPEND _unsupported ",\n    ")
    endif()
    string(APPEND _unsupported "${_entries}")
  endforeach()
  if(_unsupported)
    set(_unsupported ",\n  \"unsupported\": [\n    ${_unsupported}\n  ]")
  endif()
  set(_json "{
  \"schema\": 1,
  \"name\": ${_j_NAME},
  \"device_type\": ${_j_DEVICE_TYPE},
  \"version\": ${_j_VERSION},
  \"library\": \"$<TARGET_FILE_NAME:${target}>\",
  \"abi\": {\"major\": ${_chipdock_abi_major}, \"minor\": ${_chipdock_abi_minor}},
  \"core_version\": ${_j_CORE_VERSION},
  \"opset_version\": ${_chipdock_opset_version},
  \"vendor_runtime\": {\"name\": ${_j_VENDOR_RUNTIME}, \"version\": ${_j_RUNTIME_VERSION}},
  \"driver\": {\"name\": ${_j_DRIVER}, \"min_version\": ${_j_DRIVER_MIN_VERSION}}${_environment}${_unsupported}
}
")
  file(GENERATE
    OUTPUT "$<TARGET_FILE_DIR:${target}>/${arg_NAME}.chipdock.json"
    CONTENT "${_json}")
endfunction()

function(chipdock_install_backend target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "DESTINATION;COMPONENT" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "chipdock_install_backend(${target}): unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT DEFINED arg_DESTINATION OR arg_DESTINATION STREQUAL "")
    message(FATAL_ERROR "chipdock_install_backend(${target}): DESTINATION is required")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "chipdock_install_backend(${target}): no such target")
  endif()
  get_target_property(_name ${target} CHIPDOCK_BACKEND_NAME)
  if(NOT _name)
    message(FATAL_ERROR "chipdock_install_backend(${target}): not made by chipdock_add_backend")
  endif()
  set(_component)
  if(arg_COMPONENT)
    set(_component COMPONENT "${arg_COMPONENT}")
  endif()
  # The library and its manifest must stay side by side: the manifest names
  # the library by file name only.
  install(TARGETS ${target} LIBRARY DESTINATION "${arg_DESTINATION}" ${_component})
  install(FILES "$<TARGET_FILE_DIR:${target}>/${_name}.chipdock.json"
          DESTINATION "${arg_DESTINATION}" ${_component})
endfunction()

macro(chipdock_use_compiler_cache)
  option(CHIPDOCK_CCACHE "Compile through ccache when it is installed" ON)
  if(CHIPDOCK_CCACHE)
    find_program(CHIPDOCK_CCACHE_PROGRAM ccache)
    if(CHIPDOCK_CCACHE_PROGRAM)
      foreach(_chipdock_lang C CXX CUDA)
        if(NOT CMAKE_${_chipdock_lang}_COMPILER_LAUNCHER)
          set(CMAKE_${_chipdock_lang}_COMPILER_LAUNCHER "${CHIPDOCK_CCACHE_PROGRAM}")
        endif()
      endforeach()
      message(STATUS "chipdock: compiling through ${CHIPDOCK_CCACHE_PROGRAM}")
    endif()
  endif()
endmacro()
