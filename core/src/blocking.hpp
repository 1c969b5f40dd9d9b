// Blocking sections: a destructor that may wait for device work (a stream
// draining, a pinned buffer's copies) must not hold a lock that the work
// itself needs, such as Python's GIL when the work is a Python host
// callback. The core knows nothing of Python: a binding installs hooks that
// release and reacquire its lock, and the core brackets its waits with
// BlockingSection.
#pragma once

namespace chipdock {

struct BlockingHooks {
  // Releases the caller's lock if it holds it; returns what reacquire needs.
  void* (*release)() = nullptr;
  void (*reacquire)(void* state) = nullptr;
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

}  // namespace chipdock
