#include "runtime.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "blocking.hpp"

namespace chipdock {

namespace {
thread_local std::unordered_map<const Device*, StreamPtr> t_current_streams;
thread_local const Device* t_bound_device = nullptr;
}  // namespace

Device::Device(std::shared_ptr<Plugin> plugin, int32_t ordinal)
    : plugin_(std::move(plugin)), ordinal_(ordinal), allocator_(this) {
  properties_.struct_size = sizeof(properties_);
  CD_CALL(*plugin_, device_get_properties, ordinal_, &properties_);
  // Guard against a plugin that forgot to terminate a string.
  properties_.name[sizeof(properties_.name) - 1] = '\0';
  properties_.vendor[sizeof(properties_.vendor) - 1] = '\0';
  properties_.architecture[sizeof(properties_.architecture) - 1] = '\0';
  properties_.driver_version[sizeof(properties_.driver_version) - 1] = '\0';
  properties_.runtime_version[sizeof(properties_.runtime_version) - 1] = '\0';
}

StreamPtr Device::create_stream() {
  bind_thread();
  auto stream = std::make_shared<Stream>(this);
  std::lock_guard<std::mutex> lock(mutex_);
  // Forget streams that are gone so the list does not grow without bound.
  streams_.erase(std::remove_if(streams_.begin(), streams_.end(),
                                [](const std::weak_ptr<Stream>& s) { return s.expired(); }),
                 streams_.end());
  streams_.push_back(stream);
  return stream;
}

StreamPtr Device::default_stream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (default_stream_) return default_stream_;
  }
  StreamPtr stream = create_stream();
  StreamPtr loser;  // a stream another thread made first: torn down after the lock
  std::lock_guard<std::mutex> lock(mutex_);
  if (!default_stream_) {
    default_stream_ = stream;
    default_stream_->mark_default();
  } else {
    loser = std::move(stream);
  }
  return default_stream_;
}

StreamPtr Device::current_stream() {
  auto it = t_current_streams.find(this);
  if (it != t_current_streams.end() && it->second) return it->second;
  return default_stream();
}

void Device::set_current_stream(StreamPtr stream) {
  if (stream && &stream->device() != this) {
    throw_invalid("set_current_stream", "the stream belongs to " + stream->device().label() +
                                            ", not " + label());
  }
  if (stream) {
    t_current_streams[this] = std::move(stream);
  } else {
    t_current_streams.erase(this);
  }
}

void Device::synchronize() {
  BlockingSection unlocked;  // host callbacks may need the caller's lock (the GIL)
  bind_thread();
  std::vector<StreamPtr> live;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& weak : streams_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  // Stream by stream, interruptibly (Ctrl-C); the device slot then only
  // catches work on streams the core does not track, and returns at once.
  for (auto& s : live) {
    try {
      if (!s->destroyed()) s->synchronize();
    } catch (const Error& e) {
      if (e.code() != CD_STATUS_INVALID_HANDLE) throw;  // destroyed meanwhile by another thread
    }
  }
  live.clear();  // a last reference tears its stream down here, with no lock held
  if (plugin_->api().device_synchronize != nullptr) {
    CD_CALL(*plugin_, device_synchronize, ordinal_);
  }
}

void Device::bind_thread() {
  if (t_bound_device == this || plugin_->api().device_set_current == nullptr) return;
  CD_CALL(*plugin_, device_set_current, ordinal_);
  t_bound_device = this;
}

void Device::destroy_streams() noexcept {
  std::vector<StreamPtr> live;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& weak : streams_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
    streams_.clear();
    default_stream_.reset();
  }
  for (auto& s : live) {
    try {
      s->teardown();
    } catch (...) {
    }
  }
}

// ------------------------------------------------------------------ runtime --

Runtime& Runtime::instance() {
  // Leaked on purpose: plugin threads may outlive static destruction.
  static Runtime* runtime = new Runtime();
  return *runtime;
}

std::shared_ptr<Plugin> Runtime::add_plugin(const Manifest& manifest) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& p : plugins_) {
    if (p->device_type() == manifest.device_type) {
      throw Error(kStatusPluginRefused, manifest.name, "load",
                  "device type '" + manifest.device_type + "' is already provided by backend '" +
                      p->name() + "' (" + p->manifest().manifest_path + ")");
    }
  }
  std::shared_ptr<Plugin> plugin = Plugin::load(manifest);
  std::vector<std::unique_ptr<Device>> devices;
  for (int32_t i = 0; i < plugin->device_count(); ++i) {
    devices.push_back(std::make_unique<Device>(plugin, i));
  }
  plugins_.push_back(plugin);
  for (auto& d : devices) devices_.push_back(std::move(d));
  return plugin;
}

std::vector<std::shared_ptr<Plugin>> Runtime::plugins() {
  std::lock_guard<std::mutex> lock(mutex_);
  return plugins_;
}

std::vector<Device*> Runtime::devices() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Device*> out;
  for (auto& d : devices_) out.push_back(d.get());
  return out;
}

Device& Runtime::device(const std::string& type, int32_t ordinal, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  int32_t count = 0;
  bool type_known = false;
  for (auto& d : devices_) {
    if (d->type() != type) continue;
    ++count;
    if (d->ordinal() == ordinal) return *d;
  }
  std::string reason;
  for (auto& p : plugins_) {
    if (p->device_type() == type) {
      type_known = true;
      if (!p->device_error().empty() && count == 0) reason = " (" + p->device_error() + ")";
    }
  }
  if (!type_known) {
    throw Error(CD_STATUS_INVALID_ARGUMENT, "core", call,
                "no backend provides device type '" + type + "'");
  }
  throw Error(CD_STATUS_INVALID_ARGUMENT, type, call,
              "invalid device ordinal " + std::to_string(ordinal) + ": '" + type + "' has " +
                  std::to_string(count) + " device(s)" + reason);
}

void Runtime::shutdown() noexcept {
  std::vector<Device*> devices;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& d : devices_) devices.push_back(d.get());
  }
  UninterruptibleScope must_finish;  // at exit: finish the work, whatever the signals say
  for (Device* d : devices) {
    try {
      d->synchronize();
    } catch (...) {
    }
    d->allocator().release_cached_noexcept();
    d->destroy_streams();
  }
  for (auto& p : plugins_) p->shutdown();
}

}  // namespace chipdock
