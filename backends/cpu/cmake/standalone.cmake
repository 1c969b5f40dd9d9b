# Fallback for a tree without the backend kit (device_api/cmake): does what
# chipdock_add_backend + chipdock_install_backend do, for this backend only.
# Included from ../CMakeLists.txt with CHIPDOCK_CPU_SOURCES and
# CHIPDOCK_CPU_VERSION set.
set(_cd_include "${CMAKE_CURRENT_SOURCE_DIR}/../../device_api/include")
if(NOT EXISTS "${_cd_include}/chipdock/cd_base.h")
  message(FATAL_ERROR "chipdock-cpu: ABI headers not found at ${_cd_include}")
endif()
add_library(chipdock_cpu_abi_headers INTERFACE)
target_include_directories(chipdock_cpu_abi_headers INTERFACE "${_cd_include}")

# The ABI version for the manifest, from the header the library is built against.
file(STRINGS "${_cd_include}/chipdock/cd_base.h" _cd_abi_lines
     REGEX "#define CD_ABI_VERSION_(MAJOR|MINOR) ")
string(REGEX REPLACE ".*CD_ABI_VERSION_MAJOR ([0-9]+).*" "\\1" CHIPDOCK_ABI_MAJOR "${_cd_abi_lines}")
string(REGEX REPLACE ".*CD_ABI_VERSION_MINOR ([0-9]+).*" "\\1" CHIPDOCK_ABI_MINOR "${_cd_abi_lines}")

# The opset and core versions for the manifest, as chipdockBuiltWith.cmake reads them (null when unknown).
set(CHIPDOCK_OPSET_VERSION_JSON "null")
file(STRINGS "${CMAKE_CURRENT_SOURCE_DIR}/../../device_api/opset/opset.yaml" _cd_opset_line
     REGEX "^version: *[0-9]+ *$" LIMIT_COUNT 1)
if(_cd_opset_line MATCHES "^version: *([0-9]+)")
  set(CHIPDOCK_OPSET_VERSION_JSON "${CMAKE_MATCH_1}")
endif()
set(CHIPDOCK_CORE_VERSION_JSON "null")
file(STRINGS "${CMAKE_CURRENT_SOURCE_DIR}/../../pyproject.toml" _cd_core_lines
     REGEX "^version *= *\"[^\"]+\"" LIMIT_COUNT 1)
if(_cd_core_lines MATCHES "\"([^\"]+)\"")
  set(CHIPDOCK_CORE_VERSION_JSON "\"${CMAKE_MATCH_1}\"")
endif()

# The backend-support library (errors, core link) from the source tree.
set(_cd_support "${CMAKE_CURRENT_SOURCE_DIR}/../../device_api/support")
add_library(chipdock_cpu MODULE ${CHIPDOCK_CPU_SOURCES}
            "${_cd_support}/src/attributes.cpp" "${_cd_support}/src/core_link.cpp"
            "${_cd_support}/src/error.cpp")
target_include_directories(chipdock_cpu PRIVATE "${_cd_support}/include")
target_link_libraries(chipdock_cpu PRIVATE chipdock_cpu_abi_headers)
set_target_properties(chipdock_cpu PROPERTIES
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  LINK_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/src/exports.map")
target_link_options(chipdock_cpu PRIVATE
  "LINKER:--version-script=${CMAKE_CURRENT_SOURCE_DIR}/src/exports.map")

# The manifest, beside the library (same content the kit writes).
configure_file("${CMAKE_CURRENT_SOURCE_DIR}/cpu.chipdock.json.in"
               "${CMAKE_CURRENT_BINARY_DIR}/cpu.chipdock.json.gen" @ONLY)
file(GENERATE OUTPUT "$<TARGET_FILE_DIR:chipdock_cpu>/cpu.chipdock.json"
     INPUT "${CMAKE_CURRENT_BINARY_DIR}/cpu.chipdock.json.gen")

install(TARGETS chipdock_cpu LIBRARY DESTINATION chipdock_cpu)
install(FILES "$<TARGET_FILE_DIR:chipdock_cpu>/cpu.chipdock.json" DESTINATION chipdock_cpu)
