#include "launch.hpp"

#include "dtype.hpp"
#include "small_vector.hpp"

namespace chipdock {

namespace {

// What the core keeps per launch behind cd_kernel_context.core_private.
struct LaunchState {
  Stream* stream;
  std::vector<Block*> workspace;
};

cd_tensor_view make_view(const Tensor& t) {
  cd_tensor_view view{};
  view.struct_size = sizeof(view);
  view.data = t.storage()->data();
  view.byte_offset = t.offset() * static_cast<int64_t>(t.itemsize());
  view.shape = t.shape().empty() ? nullptr : t.shape().data();
  view.strides = t.strides().empty() ? nullptr : t.strides().data();
  view.dtype = t.dtype();
  view.ndim = static_cast<int32_t>(t.ndim());
  view.format = CD_FORMAT_STRIDED;
  view.device = t.device().ordinal();
  return view;
}

// The version extension of an input view (cd_tensor_version), for storages
// only the core writes.
cd_tensor_version make_version(const Tensor& t) {
  cd_tensor_version v{};
  v.struct_size = sizeof(v);
  v.type = CD_EXTENSION_TENSOR_VERSION;
  v.storage_id = t.storage()->id();
  v.version = t.storage()->version();
  return v;
}

cd_attribute make_attribute(const Attribute& a) {
  cd_attribute out{};
  out.struct_size = sizeof(out);
  out.name = a.name.c_str();
  out.type = a.type;
  out.count = 1;
  switch (a.type) {
    case CD_ATTR_INT: out.value.i = a.i; break;
    case CD_ATTR_FLOAT: out.value.f = a.f; break;
    case CD_ATTR_STRING: out.value.s = a.s.c_str(); break;
    case CD_ATTR_INTS:
      out.value.ints = a.ints.data();
      out.count = static_cast<int32_t>(a.ints.size());
      break;
    default:
      out.value.floats = a.floats.data();
      out.count = static_cast<int32_t>(a.floats.size());
      break;
  }
  return out;
}


std::string describe_signature(const DtypeList& dtypes) {
  std::string text = "(";
  for (size_t i = 0; i < dtypes.size(); ++i) text += (i ? ", " : "") + std::string(dtype_name(dtypes[i]));
  return text + ")";
}

}  // namespace

DtypeList signature_of(const TensorRefs& inputs, const TensorRefs& outputs) {
  DtypeList dtypes;
  for (const Tensor* t : inputs) dtypes.push_back(t->dtype());
  for (const Tensor* t : outputs) dtypes.push_back(t->dtype());
  return dtypes;
}

Kernel find_kernel(Device& device, const std::string& op, const TensorRefs& inputs, const TensorRefs& outputs) {
  return device.plugin().kernels().find(op, signature_of(inputs, outputs));
}

void launch_kernel(Stream& stream, const std::string& op, const TensorRefs& inputs, const TensorRefs& outputs,
                   const std::vector<Attribute>& attributes, const DtypeList* signature, const Kernel* resolved) {
  Device& device = stream.device();
  Kernel kernel;
  if (resolved != nullptr) {
    kernel = *resolved;
  } else {
    kernel = device.plugin().kernels().find(op, signature ? *signature : signature_of(inputs, outputs));
  }
  if (kernel.fn == nullptr) {
    DtypeList dtypes = signature ? *signature : signature_of(inputs, outputs);
    throw Error(CD_STATUS_UNIMPLEMENTED, device.plugin().name(), op,
                "no kernel registered for dtypes " + describe_signature(dtypes));
  }
  // Kernels that asked for contiguous inputs get compact copies of strided ones.
  std::vector<Tensor> compacted;
  TensorRefs actual_inputs = inputs;
  if (kernel.flags & CD_KERNEL_CONTIGUOUS_INPUTS) {
    compacted.reserve(inputs.size());
    for (auto& t : actual_inputs) {
      if (t->is_contiguous()) continue;
      compacted.push_back(t->contiguous());
      t = &compacted.back();
    }
  }
  // The structs, then the pointer arrays the kernel sees (pointers let
  // these structs grow in later minors). Inline storage: no heap traffic
  // for the common small call.
  SmallVector<cd_tensor_view, 8> in_views, out_views;
  SmallVector<cd_tensor_version, 8> in_versions;
  for (const Tensor* t : actual_inputs) {
    in_views.push_back(make_view(*t));
    in_versions.push_back(make_version(*t));
  }
  // Linked once both arrays are complete (a push may move their elements).
  for (size_t i = 0; i < in_views.size(); ++i) {
    if (!actual_inputs[i]->storage()->shared()) {
      in_views[i].next = reinterpret_cast<cd_extension*>(&in_versions[i]);
    }
  }
  for (const Tensor* t : outputs) {
    out_views.push_back(make_view(*t));
    t->storage()->note_write();
  }
  SmallVector<cd_attribute, 8> attr_structs;
  for (const Attribute& a : attributes) attr_structs.push_back(make_attribute(a));
  SmallVector<const cd_tensor_view*, 8> in_ptrs, out_ptrs;
  for (const auto& v : in_views) in_ptrs.push_back(&v);
  for (const auto& v : out_views) out_ptrs.push_back(&v);
  SmallVector<const cd_attribute*, 8> attrs;
  for (const auto& a : attr_structs) attrs.push_back(&a);

  LaunchState state{&stream, {}};
  cd_kernel_context ctx{};
  ctx.struct_size = sizeof(ctx);
  ctx.op = op.c_str();
  ctx.inputs = in_ptrs.data();
  ctx.outputs = out_ptrs.data();
  ctx.attributes = attrs.empty() ? nullptr : attrs.data();
  ctx.stream = stream.handle(op.c_str());
  ctx.core_private = &state;
  ctx.num_inputs = static_cast<int32_t>(in_views.size());
  ctx.num_outputs = static_cast<int32_t>(out_views.size());
  ctx.num_attributes = static_cast<int32_t>(attrs.size());
  ctx.device = device.ordinal();

  device.bind_thread();
  cd_error* err = kernel.fn(&ctx);
  // Workspace goes back to the stream's pool: later work on the same stream
  // runs after this kernel, so reuse needs no synchronization.
  for (Block* block : state.workspace) device.allocator().release(block);
  device.plugin().check(err, op.c_str());
}

cd_status_t workspace_allocate(const cd_kernel_context* ctx, size_t bytes, void** out) noexcept {
  auto* state = static_cast<LaunchState*>(ctx->core_private);
  if (bytes == 0) {
    *out = nullptr;
    return CD_STATUS_OK;
  }
  try {
    Block* block = state->stream->device().allocator().allocate(bytes, *state->stream);
    state->workspace.push_back(block);
    *out = block->ptr;
    return CD_STATUS_OK;
  } catch (const Error& e) {
    return e.code() == CD_STATUS_OUT_OF_MEMORY ? CD_STATUS_OUT_OF_MEMORY : CD_STATUS_INTERNAL;
  } catch (...) {
    return CD_STATUS_INTERNAL;
  }
}

}  // namespace chipdock
