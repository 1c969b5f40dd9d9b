// oneDNN helpers (see onednn.h).
#include "onednn.h"

#include <cstring>
#include <list>
#include <mutex>
#include <utility>

#include "../error.h"
#include "linalg_common.h"
#include "tensor.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace chipdock_cpu {
namespace onednn {

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::memory::data_type to_dnnl(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_FLOAT32: return dnnl::memory::data_type::f32;
    case CD_DTYPE_BFLOAT16: return dnnl::memory::data_type::bf16;
    case CD_DTYPE_INT8: return dnnl::memory::data_type::s8;
    case CD_DTYPE_UINT8: return dnnl::memory::data_type::u8;
    case CD_DTYPE_INT32: return dnnl::memory::data_type::s32;
    default: fail(CD_STATUS_INTERNAL, "oneDNN is not used for %s", dtype_name(dtype));
  }
}

dnnl::memory::desc strided_desc(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                                cd_dtype_t dtype) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), to_dnnl(dtype),
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

std::string describe(const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  Key key("md");
  auto add_dims = [&](const dnnl_dims_t dims, int n) {
    key.add(std::vector<int64_t>(dims, dims + n));
  };
  key.add(int64_t{d.ndims}).add(static_cast<int64_t>(d.data_type)).add(d.offset0);
  add_dims(d.dims, d.ndims);
  add_dims(d.padded_dims, d.ndims);
  add_dims(d.padded_offsets, d.ndims);
  key.add(static_cast<int64_t>(d.format_kind));
  if (d.format_kind == dnnl_blocked) {
    const dnnl_blocking_desc_t& b = d.format_desc.blocking;
    add_dims(b.strides, d.ndims);
    add_dims(b.inner_blks, b.inner_nblks);
    add_dims(b.inner_idxs, b.inner_nblks);
  }
  key.add(static_cast<int64_t>(d.extra.flags)).add(static_cast<int64_t>(d.extra.compensation_mask));
  return key.str();
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

bool is_reference(const char* impl_info) {
  return impl_info != nullptr && std::strncmp(impl_info, "ref", 3) == 0;
}

Key& Key::add(int64_t v) {
  text_ += ',';
  text_ += std::to_string(v);
  return *this;
}

Key& Key::add(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  text_ += ",f";
  text_ += std::to_string(bits);
  return *this;
}

Key& Key::add(const std::vector<int64_t>& v) {
  text_ += ",[";
  for (int64_t x : v) {
    text_ += std::to_string(x);
    text_ += ' ';
  }
  text_ += ']';
  return *this;
}

namespace {

class Cache {
 public:
  static constexpr size_t kCapacity = 1024;

  std::shared_ptr<void> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second.second);  // most recent first
    return it->second.first;
  }

  void insert(const std::string& key, std::shared_ptr<void> value) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      it->second.first = std::move(value);
      order_.splice(order_.begin(), order_, it->second.second);
      return;
    }
    order_.push_front(key);
    map_.emplace(key, std::make_pair(std::move(value), order_.begin()));
    while (map_.size() > kCapacity) {
      map_.erase(order_.back());
      order_.pop_back();
    }
  }

 private:
  std::mutex mu_;
  std::list<std::string> order_;
  std::unordered_map<std::string, std::pair<std::shared_ptr<void>, std::list<std::string>::iterator>> map_;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: entries may outlive static destruction order
  return *c;
}

}  // namespace

std::shared_ptr<void> cached(const Key& key, const std::function<std::shared_ptr<void>()>& make) {
  std::shared_ptr<void> hit = cache().find(key.str());
  if (hit) return hit;
  std::shared_ptr<void> made = make();
  cache().insert(key.str(), made);
  return made;
}

dnnl::memory wrap(const dnnl::memory::desc& md, const void* data) {
  return dnnl::memory(md, engine(), const_cast<void*>(data));
}

void execute(const dnnl::primitive& prim, std::unordered_map<int, dnnl::memory> args,
             const dnnl::memory::desc& scratch) {
  linalg::Buffer scratch_buf;
  const size_t bytes = scratch.get_size();
  if (bytes > 0) {
    scratch_buf.allocate(bytes);
    args.emplace(DNNL_ARG_SCRATCHPAD, wrap(scratch, scratch_buf.data()));
  }
  dnnl::stream s(engine());
  prim.execute(s, args);
  s.wait();
}

ThreadScope::ThreadScope(bool single) {
#ifdef _OPENMP
  if (single && !omp_in_parallel()) {
    saved_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
#else
  (void)single;
#endif
}

ThreadScope::~ThreadScope() {
#ifdef _OPENMP
  if (saved_ > 0) omp_set_num_threads(saved_);
#endif
}

}  // namespace onednn
}  // namespace chipdock_cpu
