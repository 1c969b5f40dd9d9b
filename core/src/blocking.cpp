#include "blocking.hpp"

#include <atomic>
#include <thread>

namespace chipdock {

namespace {
std::atomic<void* (*)()> g_release{nullptr};
std::atomic<void (*)(void*)> g_reacquire{nullptr};
std::atomic<bool (*)()> g_interrupted{nullptr};
thread_local bool t_uninterruptible = false;
}  // namespace

void set_blocking_hooks(BlockingHooks hooks) {
  g_reacquire = hooks.reacquire;
  g_release = hooks.release;
  g_interrupted = hooks.interrupted;
}

BlockingSection::BlockingSection() {
  if (auto release = g_release.load()) state_ = release();
}

BlockingSection::~BlockingSection() {
  if (auto reacquire = g_reacquire.load()) reacquire(state_);
}

UninterruptibleScope::UninterruptibleScope() : previous_(t_uninterruptible) { t_uninterruptible = true; }

UninterruptibleScope::~UninterruptibleScope() { t_uninterruptible = previous_; }

void wait_interruptibly(const std::function<bool()>& done, const char* call) {
  using clock = std::chrono::steady_clock;
  auto interrupted = g_interrupted.load();
  const bool check = interrupted != nullptr && !t_uninterruptible;
  auto next_check = clock::now() + kSignalCheckInterval;
  // Short waits (the common case) end within the yields; long ones cost at
  // most a millisecond of extra latency and almost no CPU.
  int rounds = 0;
  std::chrono::microseconds nap{5};
  while (!done()) {
    if (rounds < 64) {
      ++rounds;
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(nap);
      if (nap < std::chrono::microseconds{1000}) nap *= 2;
    }
    if (check && clock::now() >= next_check) {
      if (interrupted()) throw Interrupted(call);
      next_check = clock::now() + kSignalCheckInterval;
    }
  }
}

}  // namespace chipdock
