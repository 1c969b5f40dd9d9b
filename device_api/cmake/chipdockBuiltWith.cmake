# What a backend is built against besides the ABI, for its manifest's
# `core_version` and `opset_version` (device_api/docs/manifest.md). Included,
# not called: it sets, in the including scope,
#   _chipdock_core_version   the chipdock core this kit belongs to, e.g. 0.1.0
#                            ("" when it cannot be told)
#   _chipdock_opset_version  opset.yaml's `version`, e.g. 1 ("" when unreadable)
# In the installed wheel the core's build wrote chipdockCoreVersion.cmake
# beside this file; in the source tree the version is the top pyproject.toml's.
# The opset lies at ../opset/opset.yaml in both (device_api/opset, chipdock/opset).
set(_chipdock_core_version "")
if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/chipdockCoreVersion.cmake")
  include("${CMAKE_CURRENT_LIST_DIR}/chipdockCoreVersion.cmake")
elseif(EXISTS "${CMAKE_CURRENT_LIST_DIR}/../../pyproject.toml")
  file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../../pyproject.toml" _chipdock_project_lines
       REGEX "^(name|version) *= *\"[^\"]*\"" LIMIT_COUNT 2)
  if(_chipdock_project_lines MATCHES "name *= *\"chipdock\"" AND _chipdock_project_lines MATCHES "version *= *\"([^\"]+)\"")
    set(_chipdock_core_version "${CMAKE_MATCH_1}")
  endif()
  unset(_chipdock_project_lines)
endif()
set(_chipdock_opset_version "")
if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/../opset/opset.yaml")
  file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../opset/opset.yaml" _chipdock_opset_line
       REGEX "^version: *[0-9]+ *$" LIMIT_COUNT 1)
  if(_chipdock_opset_line MATCHES "^version: *([0-9]+)")
    set(_chipdock_opset_version "${CMAKE_MATCH_1}")
  endif()
  unset(_chipdock_opset_line)
endif()
