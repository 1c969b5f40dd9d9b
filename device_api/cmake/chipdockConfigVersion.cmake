# chipdock package version file (hand-written: the version is the device ABI
# version, read from cd_base.h, so it can never disagree with the headers).
#
#   find_package(chipdock 1)      any 1.x           (same major)
#   find_package(chipdock 1.2)    1.2 or a later 1.x (the slots you need exist)
#   find_package(chipdock 1 EXACT) only 1.0 matches 1 exactly; rarely wanted
#
# A different major is never compatible: the core refuses such plugins.
include("${CMAKE_CURRENT_LIST_DIR}/chipdockAbiVersion.cmake")

if(_chipdock_abi_major STREQUAL "")
  set(PACKAGE_VERSION "0.0")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  return()
endif()

set(PACKAGE_VERSION "${_chipdock_abi_major}.${_chipdock_abi_minor}")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)

if(PACKAGE_FIND_VERSION_RANGE)
  # A range is compatible if it starts in our major and contains our version.
  if(PACKAGE_FIND_VERSION_MIN_MAJOR STREQUAL _chipdock_abi_major
     AND PACKAGE_VERSION VERSION_GREATER_EQUAL PACKAGE_FIND_VERSION_MIN
     AND ((PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "INCLUDE"
           AND PACKAGE_VERSION VERSION_LESS_EQUAL PACKAGE_FIND_VERSION_MAX)
          OR (PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "EXCLUDE"
              AND PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION_MAX)))
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
elseif(NOT DEFINED PACKAGE_FIND_VERSION OR PACKAGE_FIND_VERSION STREQUAL "")
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_FIND_VERSION_MAJOR STREQUAL _chipdock_abi_major
       AND PACKAGE_FIND_VERSION VERSION_LESS_EQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
