#pragma once

namespace chipdock {
// Set by CMake from pyproject's version.
#ifndef CHIPDOCK_CORE_VERSION
#define CHIPDOCK_CORE_VERSION "0.0.0"
#endif
inline constexpr const char* kCoreVersion = CHIPDOCK_CORE_VERSION;
}  // namespace chipdock
