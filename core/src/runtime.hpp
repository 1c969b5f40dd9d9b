// The device registry: every accepted plugin, every device it exposes, and
// per-thread current streams.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "allocator.hpp"
#include "plugin.hpp"
#include "stream.hpp"

namespace chipdock {

class Device {
 public:
  Device(std::shared_ptr<Plugin> plugin, int32_t ordinal);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  Plugin& plugin() const noexcept { return *plugin_; }
  const std::string& type() const noexcept { return plugin_->device_type(); }
  int32_t ordinal() const noexcept { return ordinal_; }
  std::string label() const { return type() + ":" + std::to_string(ordinal_); }
  const cd_device_properties& properties() const noexcept { return properties_; }
  CachingAllocator& allocator() noexcept { return allocator_; }

  // Creates a stream on this device and tracks it for synchronize/shutdown.
  StreamPtr create_stream();
  // The device's default stream, created on first use.
  StreamPtr default_stream();
  // This thread's current stream on the device (default unless overridden).
  StreamPtr current_stream();
  // Overrides this thread's current stream; nullptr restores the default.
  void set_current_stream(StreamPtr stream);

  // Waits for all work on the device (plugin slot, else every tracked stream).
  void synchronize();
  // Makes this device current on the calling thread for thread-bound runtimes.
  void bind_thread();
  // Destroys every tracked stream (used at shutdown).
  void destroy_streams() noexcept;

 private:
  std::shared_ptr<Plugin> plugin_;
  int32_t ordinal_;
  cd_device_properties properties_{};
  CachingAllocator allocator_;
  std::mutex mutex_;
  StreamPtr default_stream_;
  std::vector<std::weak_ptr<Stream>> streams_;
};

class Runtime {
 public:
  static Runtime& instance();

  // Loads a plugin and adds its devices. Throws Error (PLUGIN_REFUSED) when
  // the plugin is refused; other plugins are unaffected.
  std::shared_ptr<Plugin> add_plugin(const Manifest& manifest);
  std::vector<std::shared_ptr<Plugin>> plugins();
  std::vector<Device*> devices();
  // Throws INVALID_ARGUMENT naming `call` for an unknown type or ordinal.
  Device& device(const std::string& type, int32_t ordinal, const char* call = "device");
  // Synchronizes and releases everything, then calls plugin_shutdown.
  void shutdown() noexcept;

 private:
  Runtime() = default;
  std::mutex mutex_;
  std::vector<std::shared_ptr<Plugin>> plugins_;
  std::vector<std::unique_ptr<Device>> devices_;
  bool shut_down_ = false;
};

}  // namespace chipdock
