# Reads the ABI version from chipdock/cd_base.h, the single source of truth
# (CD_ABI_VERSION_MAJOR / CD_ABI_VERSION_MINOR). Included, not called: it sets
#   _chipdock_abi_header  absolute path of cd_base.h
#   _chipdock_abi_major   e.g. 1   ("" if the header is missing or unparsable)
#   _chipdock_abi_minor   e.g. 0
# in the including scope. The headers live at ../include relative to this
# file, both in the source tree (device_api/cmake, device_api/include) and in
# the installed wheel (chipdock/cmake, chipdock/include).
get_filename_component(_chipdock_abi_header
  "${CMAKE_CURRENT_LIST_DIR}/../include/chipdock/cd_base.h" ABSOLUTE)
set(_chipdock_abi_major "")
set(_chipdock_abi_minor "")
if(EXISTS "${_chipdock_abi_header}")
  file(STRINGS "${_chipdock_abi_header}" _chipdock_abi_lines
       REGEX "^#define[ \t]+CD_ABI_VERSION_(MAJOR|MINOR)[ \t]+[0-9]+")
  foreach(_chipdock_abi_line IN LISTS _chipdock_abi_lines)
    if(_chipdock_abi_line MATCHES "CD_ABI_VERSION_MAJOR[ \t]+([0-9]+)")
      set(_chipdock_abi_major "${CMAKE_MATCH_1}")
    elseif(_chipdock_abi_line MATCHES "CD_ABI_VERSION_MINOR[ \t]+([0-9]+)")
      set(_chipdock_abi_minor "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  unset(_chipdock_abi_line)
  unset(_chipdock_abi_lines)
endif()
if(_chipdock_abi_major STREQUAL "" OR _chipdock_abi_minor STREQUAL "")
  set(_chipdock_abi_major "")
  set(_chipdock_abi_minor "")
endif()
