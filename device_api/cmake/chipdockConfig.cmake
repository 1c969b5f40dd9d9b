# chipdock CMake package: the device ABI headers and the backend kit.
#
#   find_package(chipdock 1 CONFIG REQUIRED)
#   chipdock_add_backend(my_backend SOURCES my_backend.c NAME mydev DEVICE_TYPE mydev)
#   chipdock_install_backend(my_backend DESTINATION <dir>)
#
# Works unchanged from the source tree (device_api/cmake) and from the
# installed wheel (<site-packages>/chipdock/cmake, see chipdock.cmake_dir()):
# the headers are always at ../include relative to this file.
#
# Provides
#   chipdock::device_api           INTERFACE IMPORTED target: the include dir
#   chipdock::backend_support      INTERFACE IMPORTED target for C++17 backends:
#                                  the support library (../support: cd_error,
#                                  exception guard, the core link), compiled
#                                  into the backend with its own flags
#   chipdock_ABI_VERSION_MAJOR     from cd_base.h
#   chipdock_ABI_VERSION_MINOR     from cd_base.h
#   chipdock_INCLUDE_DIR           the directory that holds chipdock/*.h
#   chipdock_CMAKE_DIR             this directory
#   chipdock_add_backend(), chipdock_install_backend()  (chipdockBackend.cmake)

if(CMAKE_VERSION VERSION_LESS 3.17)
  set(chipdock_FOUND FALSE)
  set(chipdock_NOT_FOUND_MESSAGE
      "chipdock's backend kit needs CMake >= 3.17 (this is ${CMAKE_VERSION})")
  return()
endif()

cmake_policy(PUSH)
cmake_policy(VERSION 3.17...3.31)

include("${CMAKE_CURRENT_LIST_DIR}/chipdockAbiVersion.cmake")
get_filename_component(_chipdock_include_dir "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)

if(_chipdock_abi_major STREQUAL "")
  set(chipdock_FOUND FALSE)
  set(chipdock_NOT_FOUND_MESSAGE
      "chipdock headers not found or unreadable: expected CD_ABI_VERSION_MAJOR/MINOR in ${_chipdock_abi_header}")
else()
  set(chipdock_ABI_VERSION_MAJOR "${_chipdock_abi_major}")
  set(chipdock_ABI_VERSION_MINOR "${_chipdock_abi_minor}")
  set(chipdock_INCLUDE_DIR "${_chipdock_include_dir}")
  set(chipdock_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

  if(NOT TARGET chipdock::device_api)
    add_library(chipdock::device_api INTERFACE IMPORTED)
    set_target_properties(chipdock::device_api PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${_chipdock_include_dir}")
  else()
    get_target_property(_chipdock_prev_include chipdock::device_api INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT _chipdock_prev_include STREQUAL _chipdock_include_dir)
      message(WARNING
        "chipdock::device_api already points at ${_chipdock_prev_include}; "
        "ignoring the second chipdock package at ${CMAKE_CURRENT_LIST_DIR}")
    endif()
    unset(_chipdock_prev_include)
  endif()

  # Sources, not a prebuilt library: they compile with the backend's flags
  # and hidden visibility, so no C++ ABI is shared between backends.
  get_filename_component(_chipdock_support_dir "${CMAKE_CURRENT_LIST_DIR}/../support" ABSOLUTE)
  if(NOT TARGET chipdock::backend_support AND EXISTS "${_chipdock_support_dir}/src/error.cpp")
    add_library(chipdock::backend_support INTERFACE IMPORTED)
    set_target_properties(chipdock::backend_support PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${_chipdock_support_dir}/include"
      INTERFACE_SOURCES "${_chipdock_support_dir}/src/attributes.cpp;${_chipdock_support_dir}/src/core_link.cpp;${_chipdock_support_dir}/src/error.cpp"
      INTERFACE_LINK_LIBRARIES chipdock::device_api)
  endif()
  unset(_chipdock_support_dir)

  include("${CMAKE_CURRENT_LIST_DIR}/chipdockBackend.cmake")
endif()

unset(_chipdock_include_dir)
unset(_chipdock_abi_header)
unset(_chipdock_abi_major)
unset(_chipdock_abi_minor)
cmake_policy(POP)
