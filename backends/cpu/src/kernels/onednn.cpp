// oneDNN helpers (see onednn.h).
#include "onednn.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <utility>

#include "../core_link.h"
#include "../error.h"
#include "isa.h"
#include "linalg_common.h"
#include "tensor.h"
#include "threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace chipdock_cpu {
namespace onednn {

// ------------------------------------------------------------ ISA and routes --

namespace {

// oneDNN's CPU levels in order (oneDNN's masks are not ordered as numbers).
enum class Level { sse41, avx, avx2, avx2_vnni, avx512_core, avx512_core_vnni, avx512_core_bf16,
                   avx512_core_amx, all };

struct LevelName {
  Level level;
  const char* env;          // as ONEDNN_MAX_CPU_ISA spells it
  dnnl_cpu_isa_t isa;
  const char* text;         // for messages
};

const LevelName kLevels[] = {
    {Level::sse41, "SSE41", dnnl_cpu_isa_sse41, "SSE4.1"},
    {Level::avx, "AVX", dnnl_cpu_isa_avx, "AVX"},
    {Level::avx2, "AVX2", dnnl_cpu_isa_avx2, "AVX2"},
    {Level::avx2_vnni, "AVX2_VNNI", dnnl_cpu_isa_avx2_vnni, "AVX2 VNNI"},
    {Level::avx512_core, "AVX512_CORE", dnnl_cpu_isa_avx512_core, "AVX-512"},
    {Level::avx512_core_vnni, "AVX512_CORE_VNNI", dnnl_cpu_isa_avx512_core_vnni, "AVX-512 VNNI"},
    {Level::avx512_core_bf16, "AVX512_CORE_BF16", dnnl_cpu_isa_avx512_core_bf16, "AVX-512 BF16"},
    {Level::avx512_core_amx, "AVX512_CORE_AMX", dnnl_cpu_isa_avx512_core_amx, "AVX-512 AMX"},
    {Level::all, "ALL", dnnl_cpu_isa_all, "all"},
};

const LevelName& level_name(Level l) { return kLevels[static_cast<int>(l)]; }

// The highest oneDNN level these features allow. oneDNN's lowest cap is
// SSE4.1: beneath it (a CPU without SSE4.1) oneDNN runs its reference code
// by itself.
Level level_for(const CpuFeatures& f) {
  if (!f.avx) return Level::sse41;
  if (!(f.avx2 && f.fma)) return Level::avx;
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return Level::avx2;
  if (!f.avx512_vnni) return Level::avx512_core;
  if (!f.avx512_bf16) return Level::avx512_core_vnni;
  if (!f.amx) return Level::avx512_core_bf16;
  return Level::all;
}

Level level_for(Isa cap) {
  switch (cap) {
    case Isa::baseline: return Level::sse41;
    case Isa::avx2: return Level::avx2;
    default: return Level::all;
  }
}

// ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA (oneDNN's own order), as a
// level; Level::all when unset or not a name we know.
Level env_level() {
  const char* env = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (env == nullptr || *env == '\0') env = std::getenv("DNNL_MAX_CPU_ISA");
  if (env == nullptr) return Level::all;
  std::string v(env);
  for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const LevelName& n : kLevels) {
    if (v == n.env) return n.level;
  }
  return Level::all;
}

std::string effective_isa_text() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  for (const LevelName& n : kLevels) {
    if (n.isa == isa && n.level != Level::all) return n.text;
  }
  return format("oneDNN ISA 0x%x", static_cast<unsigned>(isa));
}

// True if oneDNN makes a primitive descriptor with `make` that is not its
// reference code.
template <class Make>
bool has_fast(Make&& make) {
  try {
    return !is_reference(make().impl_info_str());
  } catch (const dnnl::error&) {
    return false;
  }
}

// Small problems of each family in bfloat16: does oneDNN have them natively?
Routes probe_routes() {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const dnnl::engine& eng = engine();
  Routes r;
  r.bf16_matmul = has_fast([&] {
    const dnnl::memory::desc a({16, 32}, dt::bf16, tag::ab), b({32, 16}, dt::bf16, tag::ab),
        c({16, 16}, dt::bf16, tag::ab);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), eng);
  });
  const dnnl::memory::desc src({1, 16, 8, 8}, dt::bf16, tag::any), wei({16, 16, 3, 3}, dt::bf16, tag::any),
      dst({1, 16, 8, 8}, dt::bf16, tag::any), bias({16}, dt::f32, tag::a);
  r.bf16_conv = has_fast([&] {
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        src, wei, bias, dst, {1, 1}, {0, 0}, {1, 1}, {1, 1}),
        eng);
  });
  r.bf16_deconv = has_fast([&] {
    return dnnl::deconvolution_forward::primitive_desc(
        dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::deconvolution_direct, src, wei, bias, dst, {1, 1},
                                          {0, 0}, {1, 1}, {1, 1}),
        eng);
  });
  r.bf16_pool = has_fast([&] {
    const dnnl::memory::desc x({1, 16, 8, 8}, dt::bf16, tag::abcd), y({1, 16, 4, 4}, dt::bf16, tag::abcd);
    return dnnl::pooling_forward::primitive_desc(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::pooling_avg_exclude_padding, x, y, {2, 2}, {2, 2},
                                    {0, 0}, {0, 0}),
        eng);
  });
  return r;
}

std::string routes_text(Config::Bf16 setting, const Routes& r) {
  auto way = [](bool native) { return native ? "native" : "via float32"; };
  const char* name = setting == Config::Bf16::native ? "native" : setting == Config::Bf16::float32 ? "float32" : "auto";
  return format("bfloat16 (CHIPDOCK_CPU_BF16=%s): matmul %s, conv %s, conv_transpose %s, avg_pool %s", name,
                way(r.bf16_matmul), way(r.bf16_conv), way(r.bf16_deconv), way(r.bf16_pool));
}

struct Configured {
  Routes routes;
  std::string summary;
};

const Configured& configured() {
  static const Configured c = [] {
    const Config& cfg = config();
    const IsaChoice& choice = isa_choice();
    for (const std::string& w : choice.warnings) log_message(CD_LOG_WARNING, "cpu: " + w);
    // Cap oneDNN only when something asks for less than the CPU has, and
    // never above what ONEDNN_MAX_CPU_ISA already says.
    if (cfg.isa_cap != Isa::best || !cfg.hidden_features.empty()) {
      const Level want = std::min(level_for(choice.cpu), level_for(choice.kernel_level));
      if (want < env_level() &&
          dnnl_set_max_cpu_isa(level_name(want).isa) != dnnl_success) {
        log_message(CD_LOG_WARNING,
                    format("cpu: oneDNN was already in use; it could not be capped to %s",
                           level_name(want).text));
      }
    }
    Configured out;
    if (cfg.bf16 == Config::Bf16::native) {
      out.routes.bf16_matmul = out.routes.bf16_conv = out.routes.bf16_deconv = out.routes.bf16_pool = true;
    } else if (cfg.bf16 == Config::Bf16::automatic) {
      out.routes = probe_routes();
    }
    const dnnl_version_t* v = dnnl_version();
    out.summary = format("oneDNN %d.%d.%d at %s, kernels at %s", v->major, v->minor, v->patch,
                         effective_isa_text().c_str(), isa_name(choice.kernel_level));
    log_message(CD_LOG_INFO, "cpu: " + out.summary + "; " + routes_text(cfg.bf16, out.routes));
    return out;
  }();
  return c;
}

}  // namespace

void configure() { (void)configured(); }

const Routes& routes() { return configured().routes; }

const std::string& isa_summary() { return configured().summary; }

cd_dtype_t compute_dtype(cd_dtype_t dtype, bool bf16_native) {
  if (dtype == CD_DTYPE_BFLOAT16 && bf16_native) return CD_DTYPE_BFLOAT16;
  return CD_DTYPE_FLOAT32;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

void refuse(const std::string& what, const dnnl::error& e) {
  fail(CD_STATUS_UNIMPLEMENTED, "oneDNN has no implementation for %s on this CPU (%s): %s", what.c_str(),
       isa_summary().c_str(), e.what());
}

// ------------------------------------------------------------------ engine --

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
  if (omp_in_parallel()) return;
  const int now = omp_get_max_threads();
  const int want = single ? 1 : kernel_threads();
  if (want != now) {
    saved_ = now;
    omp_set_num_threads(want);
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
