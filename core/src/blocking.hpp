// Blocking sections and interruptible waits.
//
// A wait for device work (a stream draining, a pinned buffer's copies) must
// not hold a lock that the work itself needs, such as Python's GIL when the
// work is a Python host callback. The core knows nothing of Python: a binding
// installs hooks that release and reacquire its lock, and the core brackets
// its waits with BlockingSection.
//
// The lock discipline that keeps the core free of deadlocks: a core lock
// (allocator, device, registry) is never held while the GIL is taken or
// dropped, while a stream is torn down, while a wait blocks or a host
// callback runs. Callers that come from Python hold the GIL when they take a
// core lock, so the only safe order is GIL, then core lock, never the reverse.
//
// Waits that a user can be stuck in (synchronize, event and stream waits,
// the copies behind .numpy(), the allocator's out-of-memory retry) poll their
// completion and, every kSignalCheckInterval, ask the binding whether the
// user asked to stop (Ctrl-C). They then throw Interrupted; the binding
// turns it into the Python exception the signal handler raised.
#pragma once

#include <chrono>
#include <exception>
#include <functional>

namespace chipdock {

struct BlockingHooks {
  // Releases the caller's lock if it holds it; returns what reacquire needs.
  void* (*release)() = nullptr;
  void (*reacquire)(void* state) = nullptr;
  // Runs pending signal handlers (taking the caller's lock itself); true if
  // one asked to stop the current operation. Never called under a core lock.
  bool (*interrupted)() = nullptr;
};

void set_blocking_hooks(BlockingHooks hooks);

class BlockingSection {
 public:
  BlockingSection();
  ~BlockingSection();
  BlockingSection(const BlockingSection&) = delete;
  BlockingSection& operator=(const BlockingSection&) = delete;

 private:
  void* state_ = nullptr;
};

// Thrown by an interruptible wait when a signal handler asked to stop.
class Interrupted : public std::exception {
 public:
  explicit Interrupted(const char* call) : call_(call) {}
  const char* what() const noexcept override { return "interrupted by a signal"; }
  const char* call() const noexcept { return call_; }

 private:
  const char* call_;
};

// How often a long wait checks for signals.
constexpr std::chrono::milliseconds kSignalCheckInterval{50};

// Whether interruptible waits on this thread may throw Interrupted. Off in
// destructors and other paths that must finish their wait (RAII).
class UninterruptibleScope {
 public:
  UninterruptibleScope();
  ~UninterruptibleScope();
  UninterruptibleScope(const UninterruptibleScope&) = delete;
  UninterruptibleScope& operator=(const UninterruptibleScope&) = delete;

 private:
  bool previous_;
};

// Polls `done` until it returns true, sleeping a little longer each round
// (a few microseconds first, at most a millisecond), and checks for signals
// every kSignalCheckInterval: throws Interrupted naming `call` when one asks
// to stop. Call it with no core lock held and the caller's lock released.
void wait_interruptibly(const std::function<bool()>& done, const char* call);

}  // namespace chipdock
