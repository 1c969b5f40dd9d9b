// cast: every dtype to every dtype (the `to` attribute names the output's),
// as the CPU reference: floats to integers truncate toward zero (to 8-, 16-
// and 32-bit integers through int32); to bool is x != 0 (NaN is true);
// bool to anything is 0 or 1; floats round once to nearest even (float64
// directly to float16/bfloat16); integers to float16/bfloat16 go through
// float64 (exact up to 2^53); integers to integers wrap.
#include "elementwise.cuh"

namespace chipdock_cuda {
namespace ew {
namespace {

template <class Out, class In> struct Cast : Sig<Out, In> {
  __device__ Out operator()(In x) const {
    if constexpr (std::is_same_v<Out, In>) {
      return x;
    } else if constexpr (std::is_same_v<Out, bool>) {
      if constexpr (kIsFloat<In>) return load(x) != 0;
      else return x != 0;
    } else if constexpr (std::is_same_v<In, bool>) {
      if constexpr (kIsFloat<Out>) return store<Out>(x ? 1.0f : 0.0f);
      else return static_cast<Out>(x ? 1 : 0);
    } else if constexpr (kIsFloat<In> && kIsFloat<Out>) {
      return store<Out>(load(x));
    } else if constexpr (kIsFloat<In>) {  // to an integer
      if constexpr (sizeof(Out) == 8) return static_cast<Out>(load(x));
      else return static_cast<Out>(static_cast<int32_t>(load(x)));
    } else if constexpr (std::is_same_v<Out, double> || std::is_same_v<Out, float>) {
      return static_cast<Out>(x);
    } else if constexpr (kIsFloat<Out>) {  // integers to the 16-bit floats
      return store<Out>(static_cast<double>(x));
    } else {
      return static_cast<Out>(x);
    }
  }
};

cd_error* cast_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("cast", [ctx] {
    require_non_null(ctx, "ctx");
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1 || ctx->inputs == nullptr || ctx->outputs == nullptr ||
        ctx->inputs[0] == nullptr || ctx->outputs[0] == nullptr) {
      fail(CD_STATUS_INVALID_ARGUMENT, "cast takes 1 input and 1 output");
    }
    const cd_dtype_t out_dtype = ctx->outputs[0]->dtype;
    const cd_attribute* to = find_attribute(ctx, "to");
    if (to != nullptr && (to->type != CD_ATTR_INT || to->value.i != out_dtype)) {
      fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'to' (%lld) is not the output's dtype %d",
           to->type == CD_ATTR_INT ? static_cast<long long>(to->value.i) : -1LL, out_dtype);
    }
    dispatch<kAllMask>(ctx->inputs[0]->dtype, [ctx, out_dtype](auto in_tag) {
      dispatch<kAllMask>(out_dtype, [ctx](auto out_tag) {
        launch(ctx, Cast<typename decltype(out_tag)::type, typename decltype(in_tag)::type>{}, "launching cast");
      });
    });
  });
}

}  // namespace

void register_cast(cd_kernel_registry* registry) {
  for (cd_dtype_t in = CD_DTYPE_FLOAT32; in <= CD_DTYPE_BOOL; ++in) {
    for (cd_dtype_t out = CD_DTYPE_FLOAT32; out <= CD_DTYPE_BOOL; ++out) {
      const cd_dtype_t sig[2] = {in, out};
      register_one(registry, "cast", cast_kernel, sig, 2);
    }
  }
}

}  // namespace ew
}  // namespace chipdock_cuda
