#include "blocking.hpp"

#include <atomic>

namespace chipdock {

namespace {
std::atomic<void* (*)()> g_release{nullptr};
std::atomic<void (*)(void*)> g_reacquire{nullptr};
}  // namespace

void set_blocking_hooks(BlockingHooks hooks) {
  g_reacquire = hooks.reacquire;
  g_release = hooks.release;
}

BlockingSection::BlockingSection() {
  if (auto release = g_release.load()) state_ = release();
}

BlockingSection::~BlockingSection() {
  if (auto reacquire = g_reacquire.load()) reacquire(state_);
}

}  // namespace chipdock
