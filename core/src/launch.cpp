#include "launch.hpp"

#include "dtype.hpp"

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


std::string describe_signature(const std::vector<cd_dtype_t>& dtypes) {
  std::string text = "(";
  for (size_t i = 0; i < dtypes.size(); ++i) text += (i ? ", " : "") + std::string(dtype_name(dtypes[i]));
  return text + ")";
}

}  // namespace

std::vector<cd_dtype_t> signature_of(const std::vector<const Tensor*>& inputs,
                                     const std::vector<const Tensor*>& outputs) {
  std::vector<cd_dtype_t> dtypes;
  for (const Tensor* t : inputs) dtypes.push_back(t->dtype());
  for (const Tensor* t : outputs) dtypes.push_back(t->dtype());
  return dtypes;
}

Kernel find_kernel(Device& device, const std::string& op, const std::vector<const Tensor*>& inputs,
                         const std::vector<const Tensor*>& outputs) {
  return device.plugin().kernels().find(op, signature_of(inputs, outputs));
}

void launch_kernel(Stream& stream, const std::string& op, const std::vector<const Tensor*>& inputs,
                   const std::vector<const Tensor*>& outputs, const std::vector<Attribute>& attributes,
                   const std::vector<cd_dtype_t>* signature, const Kernel* resolved) {
  Device& device = stream.device();
  Kernel kernel;
  if (resolved != nullptr) {
    kernel = *resolved;
  } else {
    kernel = device.plugin().kernels().find(op, signature ? *signature : signature_of(inputs, outputs));
  }
  if (kernel.fn == nullptr) {
    std::vector<cd_dtype_t> dtypes = signature ? *signature : signature_of(inputs, outputs);
    throw Error(CD_STATUS_UNIMPLEMENTED, device.plugin().name(), op,
                "no kernel registered for dtypes " + describe_signature(dtypes));
  }
  // Kernels that asked for contiguous inputs get compact copies of strided ones.
  std::vector<Tensor> compacted;
  compacted.reserve(inputs.size());
  std::vector<const Tensor*> actual_inputs = inputs;
  if (kernel.flags & CD_KERNEL_CONTIGUOUS_INPUTS) {
    for (auto& t : actual_inputs) {
      if (t->is_contiguous()) continue;
      compacted.push_back(t->contiguous());
      t = &compacted.back();
    }
  }
  // The structs, then the pointer arrays the kernel sees (pointers let
  // these structs grow in later minors).
  std::vector<cd_tensor_view> in_views, out_views;
  for (const Tensor* t : actual_inputs) in_views.push_back(make_view(*t));
  for (const Tensor* t : outputs) out_views.push_back(make_view(*t));
  std::vector<cd_attribute> attr_structs;
  for (const Attribute& a : attributes) attr_structs.push_back(make_attribute(a));
  std::vector<const cd_tensor_view*> in_ptrs, out_ptrs;
  for (const auto& v : in_views) in_ptrs.push_back(&v);
  for (const auto& v : out_views) out_ptrs.push_back(&v);
  std::vector<const cd_attribute*> attrs;
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
