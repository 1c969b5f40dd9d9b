// Every shape rule the opset names (see opset.yaml's `shape:` fields).
#include "shape_rules.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>

#include "chipdock/support/checked_math.h"
#include "chipdock/support/dtype_range.h"
#include "dtype.hpp"

namespace chipdock {

// ------------------------------------------------------------- the context --

void ShapeContext::fail(const std::string& what, const std::string& reason) const {
  throw Error(CD_STATUS_INVALID_ARGUMENT, "core", op.name, what + ": " + reason);
}

void ShapeContext::require_ndim(size_t i, int64_t n) const {
  if (ndim(i) != n) {
    fail(arg(i), "expected " + std::to_string(n) + " dims, got shape " + describe_shape(shape(i)));
  }
}

int64_t ShapeContext::normalize_axis(const std::string& attr, int64_t axis, int64_t n) const {
  const int64_t lo = n == 0 ? -1 : -n, hi = n == 0 ? 0 : n - 1;
  if (axis < lo || axis > hi) {
    fail(attr, std::to_string(axis) + " is out of range for " + std::to_string(n) + " dims");
  }
  return axis < 0 ? axis + std::max<int64_t>(n, 1) : axis;
}

namespace {

[[noreturn]] void overflow(const ShapeContext& c, const std::string& what, int64_t a, const char* op, int64_t b) {
  c.fail(what, "the size " + std::to_string(a) + " " + op + " " + std::to_string(b) + " overflows int64");
}

}  // namespace

int64_t ShapeContext::mul(const std::string& what, int64_t a, int64_t b) const {
  const std::optional<int64_t> r = support::checked_mul(a, b);
  if (!r) overflow(*this, what, a, "*", b);
  return *r;
}

int64_t ShapeContext::add(const std::string& what, int64_t a, int64_t b) const {
  const std::optional<int64_t> r = support::checked_add(a, b);
  if (!r) overflow(*this, what, a, "+", b);
  return *r;
}

int64_t ShapeContext::sub(const std::string& what, int64_t a, int64_t b) const {
  const std::optional<int64_t> r = support::checked_sub(a, b);
  if (!r) overflow(*this, what, a, "-", b);
  return *r;
}

Shape ShapeContext::broadcast(const Shape& a, const Shape& b, const std::string& what) const {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      fail(what, "shapes " + describe_shape(a) + " and " + describe_shape(b) + " do not broadcast");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor expand_view(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;  // already that shape (most operands)
  const size_t n = shape.size(), m = t.shape().size();
  Shape strides(n, 0);
  for (size_t i = 0; i < m; ++i) {
    const size_t j = n - m + i;
    strides[j] = t.shape()[i] == 1 && shape[j] != 1 ? 0 : t.strides()[i];
  }
  return t.as_strided(shape, strides, t.offset());
}

namespace {

// ---------------------------------------------------------------- general --

void rule_same(ShapeContext& c) { c.output_shapes = {c.shape(0)}; }

void rule_same_axis(ShapeContext& c) {
  c.set_int("axis", c.normalize_axis("axis", c.get_int("axis"), c.ndim(0)));
  c.output_shapes = {c.shape(0)};
}

void rule_broadcast(ShapeContext& c) {
  Shape out;
  bool first = true;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.has(i)) continue;
    out = first ? c.shape(i) : c.broadcast(out, c.shape(i), c.arg(i));
    first = false;
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.has(i)) c.inputs[i][0] = expand_view(c.in(i), out);
  }
  c.output_shapes = {out};
}

// ------------------------------------------------------------- reductions --

void rule_reduce(ShapeContext& c) {
  const int64_t n = c.ndim(0);
  std::set<int64_t> axes;
  for (int64_t a : c.get_ints("axes")) {
    if (!axes.insert(c.normalize_axis("axes", a, n)).second) c.fail("axes", "axis " + std::to_string(a) + " repeats");
  }
  if (axes.empty()) {
    for (int64_t a = 0; a < n; ++a) axes.insert(a);
  }
  const bool keepdims = c.get_int("keepdims") != 0;
  Shape out;
  for (int64_t d = 0; d < n; ++d) {
    if (!axes.count(d)) {
      out.push_back(c.shape(0)[d]);
    } else {
      if (c.op.nonempty && c.shape(0)[d] == 0) c.fail("x", "cannot reduce an empty dimension " + std::to_string(d));
      if (keepdims) out.push_back(1);
    }
  }
  c.get_ints("axes") = std::vector<int64_t>(axes.begin(), axes.end());
  c.output_shapes = {out};
}

void rule_reduce_axis(ShapeContext& c) {
  const int64_t n = c.ndim(0);
  const int64_t axis = c.normalize_axis("axis", c.get_int("axis"), n);
  c.set_int("axis", axis);
  Shape out;
  for (int64_t d = 0; d < n; ++d) {
    if (d != axis) {
      out.push_back(c.shape(0)[d]);
    } else {
      if (c.shape(0)[d] == 0) c.fail("x", "cannot reduce an empty dimension " + std::to_string(d));
      if (c.get_int("keepdims")) out.push_back(1);
    }
  }
  if (n == 0 && c.in(0).numel() == 0) c.fail("x", "cannot reduce an empty tensor");
  c.output_shapes = {out};
}

// ---------------------------------------------------------- normalization --

void rule_batch_norm(ShapeContext& c) {
  if (c.ndim(0) < 2) c.fail("x", "expected at least 2 dims (N, C, ...), got " + describe_shape(c.shape(0)));
  const int64_t channels = c.shape(0)[1];
  for (size_t i = 1; i < 5; ++i) {
    if (c.shape(i) != Shape{channels}) {
      c.fail(c.arg(i), "expected shape (" + std::to_string(channels) + ",), got " + describe_shape(c.shape(i)));
    }
  }
  c.output_shapes = {c.shape(0)};
}

void rule_layer_norm(ShapeContext& c) {
  const Shape& x = c.shape(0);
  const Shape& scale = c.shape(1);
  if (scale.empty() || scale.size() > x.size() || !std::equal(scale.begin(), scale.end(), x.end() - scale.size())) {
    c.fail("scale", "shape " + describe_shape(scale) + " must equal the trailing dims of x " + describe_shape(x));
  }
  if (c.has(2) && c.shape(2) != scale) {
    c.fail("bias", "shape " + describe_shape(c.shape(2)) + " must equal scale's " + describe_shape(scale));
  }
  c.output_shapes = {x};
}

void rule_group_norm(ShapeContext& c) {
  if (c.ndim(0) < 2) c.fail("x", "expected at least 2 dims (N, C, ...), got " + describe_shape(c.shape(0)));
  const int64_t channels = c.shape(0)[1];
  const int64_t groups = c.get_int("num_groups");
  if (channels % groups != 0) {
    c.fail("num_groups", std::to_string(groups) + " does not divide " + std::to_string(channels) + " channels");
  }
  for (size_t i = 1; i < 3; ++i) {
    if (c.shape(i) != Shape{channels}) {
      c.fail(c.arg(i), "expected shape (" + std::to_string(channels) + ",), got " + describe_shape(c.shape(i)));
    }
  }
  c.output_shapes = {c.shape(0)};
}

// Cross-channel windows of `size` channels over x (N, C, ...). Every output
// reads `size` taps (the part inside the channels): the total, which a
// kernel counts to plan its work, must fit int64.
void rule_local_response_norm(ShapeContext& c) {
  if (c.ndim(0) < 2) c.fail("x", "expected at least 2 dims (N, C, ...), got " + describe_shape(c.shape(0)));
  c.mul("size", c.in(0).numel(), c.get_int("size"));
  c.output_shapes = {c.shape(0)};
}

// --------------------------------------------------------- linear algebra --

void rule_matmul(ShapeContext& c) {
  Tensor a = c.in(0), b = c.in(1);
  if (a.ndim() == 0 || b.ndim() == 0) c.fail(a.ndim() == 0 ? "a" : "b", "matmul does not take 0-d operands");
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  if (a_vec) a = a.as_strided({1, a.shape()[0]}, {0, a.strides()[0]}, a.offset());
  if (b_vec) b = b.as_strided({b.shape()[0], 1}, {b.strides()[0], 0}, b.offset());
  const int64_t m = a.shape()[a.ndim() - 2], k = a.shape()[a.ndim() - 1];
  const int64_t k2 = b.shape()[b.ndim() - 2], n = b.shape()[b.ndim() - 1];
  if (k != k2) {
    c.fail("b", "inner dimensions differ: a is " + describe_shape(c.shape(0)) + ", b is " + describe_shape(c.shape(1)));
  }
  Shape batch = c.broadcast(Shape(a.shape().begin(), a.shape().end() - 2), Shape(b.shape().begin(), b.shape().end() - 2),
                            "batch dims");
  Shape a_full = batch, b_full = batch, out = batch;
  a_full.insert(a_full.end(), {m, k});
  b_full.insert(b_full.end(), {k, n});
  out.insert(out.end(), {m, n});
  c.inputs[0][0] = expand_view(a, a_full);
  c.inputs[1][0] = expand_view(b, b_full);
  c.output_shapes = {out};
  if (a_vec || b_vec) {
    Shape result = batch;
    if (!a_vec) result.push_back(m);
    if (!b_vec) result.push_back(n);
    c.reshape_output = result;
  }
}

void rule_gemm(ShapeContext& c) {
  c.require_ndim(0, 2);
  c.require_ndim(1, 2);
  const bool ta = c.get_int("trans_a") != 0, tb = c.get_int("trans_b") != 0;
  const int64_t m = c.shape(0)[ta ? 1 : 0], k = c.shape(0)[ta ? 0 : 1];
  const int64_t k2 = c.shape(1)[tb ? 1 : 0], n = c.shape(1)[tb ? 0 : 1];
  if (k != k2) c.fail("b", "inner dimensions differ (" + std::to_string(k) + " vs " + std::to_string(k2) + ")");
  Shape out{m, n};
  if (c.has(2)) {
    if (c.broadcast(c.shape(2), out, "c") != out) c.fail("c", describe_shape(c.shape(2)) + " does not broadcast to " + describe_shape(out));
    c.inputs[2][0] = expand_view(c.in(2), out);
  }
  c.output_shapes = {out};
}

// ------------------------------------------------------------ convolution --

// The taps a kernel of `kernel` taps `dilation` apart spans: dilation * (kernel - 1) + 1.
int64_t dilated_extent(const ShapeContext& c, int64_t kernel, int64_t dilation) {
  return c.add("dilation", c.mul("dilation", dilation, kernel - 1), 1);
}

// Output positions of a window sliding `stride` apart over `in` plus `pad`
// (both sides); fails naming `what` when the dilated kernel does not fit the
// padded input (the attribute range "kernel <= padded input").
int64_t window_count(const ShapeContext& c, const std::string& what, int64_t in, int64_t pad, int64_t kernel,
                     int64_t stride, int64_t dilation) {
  const int64_t padded = c.add("padding", in, pad), extent = dilated_extent(c, kernel, dilation);
  if (extent > padded) {
    c.fail(what, "the kernel does not fit: it spans " + std::to_string(extent) + " positions (kernel " +
                     std::to_string(kernel) + ", dilation " + std::to_string(dilation) + "), the padded input " +
                     std::to_string(padded));
  }
  return (padded - extent) / stride + 1;
}

void check_conv_weights(ShapeContext& c, int64_t in_channels, int64_t weight_in, int64_t out_channels, bool transposed) {
  const int64_t groups = c.get_int("groups");
  if (in_channels % groups != 0) c.fail("groups", std::to_string(groups) + " does not divide " + std::to_string(in_channels) + " input channels");
  if (out_channels % groups != 0) c.fail("groups", std::to_string(groups) + " does not divide " + std::to_string(out_channels) + " output channels");
  if (!transposed && support::checked_mul(weight_in, groups) != in_channels) {
    c.fail("weight", "has " + std::to_string(weight_in) + " input channels per group; x has " +
                         std::to_string(in_channels) + " channels in " + std::to_string(groups) + " groups");
  }
  if (c.has(2) && c.shape(2) != Shape{out_channels}) {
    c.fail("bias", "expected shape (" + std::to_string(out_channels) + ",), got " + describe_shape(c.shape(2)));
  }
}

void rule_conv2d(ShapeContext& c) {
  c.require_ndim(0, 4);
  c.require_ndim(1, 4);
  const Shape &x = c.shape(0), &w = c.shape(1);
  check_conv_weights(c, x[1], w[1], w[0], false);
  const auto &s = c.get_ints("stride"), &p = c.get_ints("padding"), &d = c.get_ints("dilation");
  const int64_t h = window_count(c, "x", x[2], c.add("padding", p[0], p[2]), w[2], s[0], d[0]);
  const int64_t wd = window_count(c, "x", x[3], c.add("padding", p[1], p[3]), w[3], s[1], d[1]);
  c.output_shapes = {{x[0], w[0], h, wd}};
  if (c.attrs.count("layout") && c.get_string("layout") == "nhwc") c.output_shapes = {{x[0], h, wd, w[0]}};
  // conv2d_fused's residual is added to the output as it is (no broadcast).
  if (c.has(3) && c.shape(3) != c.output_shapes[0]) {
    c.fail("residual", "expected the output's shape " + describe_shape(c.output_shapes[0]) + ", got " +
                           describe_shape(c.shape(3)));
  }
}

void rule_conv_transpose2d(ShapeContext& c) {
  c.require_ndim(0, 4);
  c.require_ndim(1, 4);
  const Shape &x = c.shape(0), &w = c.shape(1);
  const int64_t groups = c.get_int("groups");
  if (w[0] != x[1]) c.fail("weight", "dim 0 must equal the " + std::to_string(x[1]) + " input channels, got " + describe_shape(w));
  check_conv_weights(c, x[1], w[0], c.mul("groups", w[1], groups), true);
  const auto &s = c.get_ints("stride"), &p = c.get_ints("padding"), &d = c.get_ints("dilation");
  const auto& op = c.get_ints("output_padding");
  for (int i = 0; i < 2; ++i) {
    if (op[i] >= s[i] && op[i] >= d[i]) c.fail("output_padding", "must be smaller than stride or dilation");
  }
  // (in - 1) * stride - pad_begin - pad_end + dilation * (kernel - 1) + output_padding + 1
  auto out_size = [&](int i) {
    const int64_t grown = c.add("stride", c.mul("stride", x[2 + i] - 1, s[i]), dilated_extent(c, w[2 + i], d[i]));
    return c.sub("padding", c.add("output_padding", grown, op[i]), c.add("padding", p[i], p[i + 2]));
  };
  const int64_t h = out_size(0), wd = out_size(1);
  if (h < 1 || wd < 1) c.fail("padding", "leaves no output (" + std::to_string(h) + "x" + std::to_string(wd) + ")");
  c.output_shapes = {{x[0], c.mul("groups", w[1], groups), h, wd}};
}

int64_t pool_out(const ShapeContext& c, int64_t in, int64_t pad_begin, int64_t pad_end, int64_t kernel, int64_t stride,
                 int64_t dilation, bool ceil_mode) {
  const int64_t padded = c.add("padding", in, c.add("padding", pad_begin, pad_end));
  const int64_t extent = dilated_extent(c, kernel, dilation);
  if (extent > padded) {
    c.fail("kernel", "does not fit the input: the window spans " + std::to_string(extent) + " positions (kernel " +
                         std::to_string(kernel) + ", dilation " + std::to_string(dilation) + "), the padded input " +
                         std::to_string(padded));
  }
  const int64_t span = padded - extent;  // >= 0: no floor division of a negative, no overflow below
  int64_t out = (ceil_mode ? span / stride + (span % stride != 0) : span / stride) + 1;
  // The last window must start inside the input or its left padding (PyTorch's rule).
  // (A start past int64 is past the input too.)
  const std::optional<int64_t> last_start = support::checked_mul(out - 1, stride);
  if (ceil_mode && (!last_start || *last_start >= in + pad_begin)) --out;
  return out;
}

void rule_pool2d(ShapeContext& c) {
  c.require_ndim(0, 4);
  const Shape& x = c.shape(0);
  const auto& k = c.get_ints("kernel");
  auto& s = c.get_ints("stride");
  if (s.empty()) s = k;
  if (s.size() != 2 || s[0] < 1 || s[1] < 1) c.fail("stride", "expected 2 values >= 1");
  const auto& p = c.get_ints("padding");
  const std::vector<int64_t> one{1, 1};
  const auto& d = c.attrs.count("dilation") ? c.get_ints("dilation") : one;
  for (int i = 0; i < 2; ++i) {
    if (p[i] > k[i] / 2 || p[i + 2] > k[i] / 2) c.fail("padding", "must be at most half the kernel size");
  }
  const bool ceil_mode = c.get_int("ceil_mode") != 0;
  const int64_t h = pool_out(c, x[2], p[0], p[2], k[0], s[0], d[0], ceil_mode);
  const int64_t w = pool_out(c, x[3], p[1], p[3], k[1], s[1], d[1], ceil_mode);
  if (h < 1 || w < 1) c.fail("kernel", "does not fit the input " + describe_shape(x));
  // A window has kernel[0] * kernel[1] taps: a kernel must be able to count them
  // (most may lie in the padding; a backend visits only those inside the input).
  c.mul("kernel", k[0], k[1]);
  c.output_shapes = {{x[0], x[1], h, w}};
}

void rule_global_pool(ShapeContext& c) {
  if (c.ndim(0) < 3) c.fail("x", "expected (N, C, spatial...), got " + describe_shape(c.shape(0)));
  Shape out = c.shape(0);
  std::fill(out.begin() + 2, out.end(), 1);
  c.output_shapes = {out};
}

void rule_attention(ShapeContext& c) {
  for (size_t i = 0; i < 3; ++i) {
    if (c.ndim(i) < 2) c.fail(c.arg(i), "expected at least 2 dims, got " + describe_shape(c.shape(i)));
  }
  const Shape &q = c.shape(0), &k = c.shape(1), &v = c.shape(2);
  const int64_t l = q[q.size() - 2], e = q.back(), s = k[k.size() - 2], ev = v.back();
  if (k.back() != e) c.fail("k", "last dim " + std::to_string(k.back()) + " differs from q's " + std::to_string(e));
  if (v[v.size() - 2] != s) c.fail("v", "has " + std::to_string(v[v.size() - 2]) + " positions, k has " + std::to_string(s));
  auto batch_of = [](const Shape& sh) { return Shape(sh.begin(), sh.end() - 2); };
  Shape batch = c.broadcast(c.broadcast(batch_of(q), batch_of(k), "k"), batch_of(v), "v");
  auto with = [&](int64_t a, int64_t b) { Shape out = batch; out.insert(out.end(), {a, b}); return out; };
  c.inputs[0][0] = expand_view(c.in(0), with(l, e));
  c.inputs[1][0] = expand_view(c.in(1), with(s, e));
  c.inputs[2][0] = expand_view(c.in(2), with(s, ev));
  if (c.has(3)) {
    Shape target = with(l, s);
    if (c.broadcast(c.shape(3), target, "mask") != target) c.fail("mask", describe_shape(c.shape(3)) + " does not broadcast to " + describe_shape(target));
    c.inputs[3][0] = expand_view(c.in(3), target);
  }
  if (c.get_float("scale") == 0.0) c.set_float("scale", 1.0 / std::sqrt(static_cast<double>(e)));
  c.output_shapes = {with(l, ev)};
}

// -------------------------------------------------------------- view ops --

void rule_reshape(ShapeContext& c) {
  Shape target = c.get_ints("shape");
  const int64_t total = c.in(0).numel();
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer >= 0) c.fail("shape", "only one dim may be -1");
      infer = static_cast<int64_t>(i);
    } else if (target[i] < 0) {
      c.fail("shape", "negative dim " + std::to_string(target[i]));
    } else {
      known = c.mul("shape", known, target[i]);
    }
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) c.fail("shape", describe_shape(target) + " does not fit " + std::to_string(total) + " elements");
    target[infer] = total / known;
  }
  if (known != total && infer < 0) {
    c.fail("shape", describe_shape(target) + " has " + std::to_string(known) + " elements, x has " + std::to_string(total));
  }
  Tensor x = c.in(0).is_contiguous() ? c.in(0) : c.in(0).contiguous();
  c.view_result = x.as_strided(target, contiguous_strides(target), x.offset());
}

void rule_transpose(ShapeContext& c) {
  auto& perm = c.get_ints("perm");
  const int64_t n = c.ndim(0);
  if (perm.empty()) {
    for (int64_t i = n - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != n) c.fail("perm", "has " + std::to_string(perm.size()) + " entries for " + std::to_string(n) + " dims");
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t p : perm) {
    const int64_t d = p < 0 ? p + n : p;
    if (d < 0 || d >= n || seen[static_cast<size_t>(d)]) c.fail("perm", describe_shape(perm) + " is not a permutation of 0.." + std::to_string(n - 1));
    seen[static_cast<size_t>(d)] = true;
  }
  c.view_result = c.in(0).permute(perm);
}

// One-way broadcast (NumPy's broadcast_to): x's dims, aligned from the
// right, each equal the target's or are 1; the target never has fewer dims.
// Two-way broadcasting (ONNX Expand) computes the target before calling.
void rule_expand(ShapeContext& c) {
  const Shape& x = c.shape(0);
  const Shape& target = c.get_ints("shape");
  if (target.size() < x.size()) {
    c.fail("shape", describe_shape(target) + " has fewer dims than x's shape " + describe_shape(x));
  }
  const size_t lead = target.size() - x.size();
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != 1 && x[i] != target[lead + i]) {
      c.fail("shape", "x's shape " + describe_shape(x) + " does not expand to " + describe_shape(target) +
                          " (dim " + std::to_string(i) + " of size " + std::to_string(x[i]) +
                          " is not 1 and differs from " + std::to_string(target[lead + i]) + ")");
    }
  }
  // A stride-0 view holds no memory, but a reader or a host copy sees all of it: its bytes must fit (as NumPy's).
  shape_nbytes(target, c.in(0).dtype(), c.op.name.c_str());
  c.view_result = expand_view(c.in(0), target);
}

void rule_slice(ShapeContext& c) {
  const Tensor& x = c.in(0);
  const int64_t n = x.ndim();
  const auto &starts = c.get_ints("starts"), &ends = c.get_ints("ends");
  std::vector<int64_t> axes = c.get_ints("axes"), steps = c.get_ints("steps");
  if (starts.size() != ends.size()) c.fail("ends", "must have as many entries as starts");
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) c.fail("axes", "axes, starts, ends and steps must have equal lengths");
  if (n == 0 && !starts.empty()) c.fail("starts", "a 0-d tensor has no axis to slice");
  Shape shape = x.shape(), strides = x.strides();
  int64_t offset = x.offset();
  std::set<int64_t> seen;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = c.normalize_axis("axes", axes[i], n);
    if (!seen.insert(axis).second) c.fail("axes", "axis " + std::to_string(axis) + " repeats");
    const int64_t step = steps[i], dim = x.shape()[axis];
    if (step == 0) c.fail("steps", "a step of 0");
    // Python slice semantics: clamp into range, by the direction of the step.
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v < 0 ? v + dim : v, lo), hi); };
    int64_t start = step > 0 ? clamp(starts[i], 0, dim) : clamp(starts[i], -1, dim - 1);
    int64_t end = step > 0 ? clamp(ends[i], 0, dim) : clamp(ends[i], -1, dim - 1);
    if (step < 0 && ends[i] < -dim) end = -1;  // "to the beginning"
    // ceil(distance / |step|) without forming distance + |step| (steps reach +-2^63).
    const int64_t distance = step > 0 ? end - start : start - end;
    const uint64_t magnitude = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
    const int64_t count = distance <= 0 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(distance - 1) / magnitude) + 1;
    if (count > 0) offset = c.add("starts", offset, c.mul("starts", start, x.strides()[axis]));
    shape[axis] = count;
    strides[axis] = c.mul("steps", x.strides()[axis], step);
  }
  c.view_result = x.as_strided(shape, strides, offset);
}

// --------------------------------------------------------- data movement --

void rule_concat(ShapeContext& c) {
  const auto& parts = c.inputs[0];
  const Shape& first = parts.front().shape();
  const int64_t axis = c.normalize_axis("axis", c.get_int("axis"), static_cast<int64_t>(first.size()));
  c.set_int("axis", axis);
  if (first.empty()) c.fail("inputs", "cannot concatenate 0-d tensors");
  Shape out = first;
  out[axis] = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Shape& s = parts[i].shape();
    bool ok = s.size() == first.size();
    for (size_t d = 0; ok && d < s.size(); ++d) ok = static_cast<int64_t>(d) == axis || s[d] == first[d];
    if (!ok) c.fail("inputs[" + std::to_string(i) + "]", "shape " + describe_shape(s) + " does not match " + describe_shape(first) + " outside axis " + std::to_string(axis));
    out[axis] = c.add("inputs", out[axis], s[axis]);
  }
  c.output_shapes = {out};
}

void rule_split(ShapeContext& c) {
  const Shape& x = c.shape(0);
  const int64_t axis = c.normalize_axis("axis", c.get_int("axis"), c.ndim(0));
  c.set_int("axis", axis);
  auto& sizes = c.get_ints("sizes");
  const int64_t num = c.get_int("num"), dim = x[axis];
  if (sizes.empty()) {
    if (num <= 0) c.fail("sizes", "give sizes or num");
    // More pieces than elements only happen for an empty dim (0 divides into any num): bounded before the
    // outputs are made, so a huge num is an error, not an allocation of num outputs.
    if (num > std::max<int64_t>(dim, 1)) {
      c.fail("num", std::to_string(num) + " pieces for dim " + std::to_string(axis) + " of size " + std::to_string(dim) +
                        " (at most max(size, 1))");
    }
    if (dim % num != 0) c.fail("num", std::to_string(num) + " does not divide dim " + std::to_string(axis) + " of size " + std::to_string(dim));
    sizes.assign(num, dim / num);
  } else {
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) c.fail("sizes", "negative size " + std::to_string(s));
      total = c.add("sizes", total, s);
    }
    if (total != dim) c.fail("sizes", "sum to " + std::to_string(total) + ", dim " + std::to_string(axis) + " has " + std::to_string(dim));
  }
  c.set_int("num", static_cast<int64_t>(sizes.size()));
  for (int64_t s : sizes) {
    Shape out = x;
    out[axis] = s;
    c.output_shapes.push_back(out);
  }
}

void rule_gather(ShapeContext& c) {
  const Shape &data = c.shape(0), &idx = c.shape(1);
  if (data.empty()) c.fail("data", "cannot gather from a 0-d tensor");
  const int64_t axis = c.normalize_axis("axis", c.get_int("axis"), c.ndim(0));
  c.set_int("axis", axis);
  Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  c.output_shapes = {out};
}

void rule_gather_elements(ShapeContext& c) {
  const Shape &data = c.shape(0), &idx = c.shape(1);
  if (data.size() != idx.size() || data.empty()) c.fail("indices", "must have the rank of data (" + std::to_string(data.size()) + "), got " + describe_shape(idx));
  const int64_t axis = c.normalize_axis("axis", c.get_int("axis"), c.ndim(0));
  c.set_int("axis", axis);
  for (size_t d = 0; d < data.size(); ++d) {
    if (static_cast<int64_t>(d) != axis && idx[d] > data[d]) c.fail("indices", "dim " + std::to_string(d) + " is larger than data's");
  }
  c.output_shapes = {idx};
}

void rule_scatter(ShapeContext& c) {
  const Shape &data = c.shape(0), &idx = c.shape(1), &upd = c.shape(2);
  if (idx != upd) c.fail("updates", "shape " + describe_shape(upd) + " must equal indices' " + describe_shape(idx));
  if (data.size() != idx.size() || data.empty()) c.fail("indices", "must have the rank of data (" + std::to_string(data.size()) + ")");
  const int64_t axis = c.normalize_axis("axis", c.get_int("axis"), c.ndim(0));
  c.set_int("axis", axis);
  for (size_t d = 0; d < data.size(); ++d) {
    if (static_cast<int64_t>(d) != axis && idx[d] > data[d]) c.fail("indices", "dim " + std::to_string(d) + " is larger than data's");
  }
  c.output_shapes = {data};
}

void rule_embedding(ShapeContext& c) {
  c.require_ndim(0, 2);
  Shape out = c.shape(1);
  out.push_back(c.shape(0)[1]);
  c.output_shapes = {out};
}

void rule_pad(ShapeContext& c) {
  const Shape& x = c.shape(0);
  const size_t n = x.size();
  const auto& pads = c.get_ints("pads");
  if (pads.size() != 2 * n) c.fail("pads", "expected " + std::to_string(2 * n) + " values (begins, then ends), got " + std::to_string(pads.size()));
  const std::string& mode = c.get_string("mode");
  Shape out(n);
  for (size_t d = 0; d < n; ++d) {
    const int64_t lo = pads[d], hi = pads[d + n];
    if (mode == "reflect" && (lo >= x[d] || hi >= x[d]) && (lo > 0 || hi > 0)) c.fail("pads", "reflect padding must be smaller than dim " + std::to_string(d) + " (" + std::to_string(x[d]) + ")");
    if (mode == "edge" && x[d] == 0 && (lo > 0 || hi > 0)) c.fail("pads", "edge padding of an empty dim " + std::to_string(d));
    out[d] = c.add("pads", c.add("pads", x[d], lo), hi);
  }
  c.output_shapes = {out};
}

void rule_tile(ShapeContext& c) {
  const Shape& x = c.shape(0);
  const auto& reps = c.get_ints("repeats");
  if (reps.size() != x.size()) c.fail("repeats", "expected " + std::to_string(x.size()) + " values, got " + std::to_string(reps.size()));
  Shape out(x.size());
  for (size_t d = 0; d < x.size(); ++d) out[d] = c.mul("repeats", x[d], reps[d]);
  c.output_shapes = {out};
}

void rule_resize(ShapeContext& c) {
  c.require_ndim(0, 4);
  const Shape& x = c.shape(0);
  auto& sizes = c.get_ints("sizes");
  auto& scales = c.get_floats("scales");
  if (sizes.empty() == scales.empty()) c.fail("sizes", "give exactly one of sizes and scales");
  if (sizes.empty()) {
    if (scales.size() != 2 || !(scales[0] > 0) || !(scales[1] > 0)) c.fail("scales", "expected 2 positive values");
    // A double at or past 2^63 does not convert to int64 (undefined behaviour, in practice INT64_MIN).
    auto scaled = [&](int64_t in, double scale) {
      const double v = std::floor(static_cast<double>(in) * scale);
      if (!(v < 9223372036854775808.0)) c.fail("scales", "the output size " + std::to_string(v) + " overflows int64");
      return static_cast<int64_t>(v);
    };
    sizes = {scaled(x[2], scales[0]), scaled(x[3], scales[1])};
  } else {
    if (sizes.size() != 2 || sizes[0] < 1 || sizes[1] < 1) c.fail("sizes", "expected 2 values >= 1");
    if (x[2] == 0 || x[3] == 0) c.fail("x", "cannot resize an empty image");
    scales = {static_cast<double>(sizes[0]) / x[2], static_cast<double>(sizes[1]) / x[3]};
  }
  c.output_shapes = {{x[0], x[1], sizes[0], sizes[1]}};
}

void rule_arange(ShapeContext& c) {
  const double start = c.get_float("start"), limit = c.get_float("limit"), delta = c.get_float("delta");
  if (delta == 0.0 || !std::isfinite(delta)) c.fail("delta", "must be finite and non-zero");
  if (!std::isfinite(start) || !std::isfinite(limit)) c.fail("limit", "start and limit must be finite");
  const double count = std::ceil((limit - start) / delta);
  if (!(count < 9223372036854775808.0)) {
    char text[32];  // %g: std::to_string would print all 300 digits of 1e300
    std::snprintf(text, sizeof text, "%.6g", count);
    c.fail("limit", std::string("(limit - start) / delta = ") + text + " elements overflows int64");
  }
  c.output_shapes = {{count > 0 ? static_cast<int64_t>(count) : 0}};
}

void rule_full(ShapeContext& c) {
  const Shape& shape = c.get_ints("shape");
  if (!support::checked_numel(shape.data(), shape.size())) c.fail("shape", describe_shape(shape) + " has more than 2^63 elements");
  // Kernels check this too, but none runs for an empty output: checked here,
  // a value its dtype cannot hold is refused for every shape.
  const double value = c.get_float("value");
  const auto dtype = static_cast<cd_dtype_t>(c.get_int("dtype"));
  if (!support::dtype_holds(dtype, value)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    c.fail("value", std::string(text) + " does not fit " + dtype_name(dtype));
  }
  c.output_shapes = {shape};
}

void rule_topk(ShapeContext& c) {
  const int64_t axis = c.normalize_axis("axis", c.get_int("axis"), c.ndim(0));
  c.set_int("axis", axis);
  Shape out = c.shape(0);
  const int64_t dim = out.empty() ? 1 : out[axis], k = c.get_int("k");
  // A 0-d x has one element and its outputs are 0-d (one element each): only k = 1 fits.
  if (out.empty() && k != 1) c.fail("k", std::to_string(k) + " for a 0-d tensor (its outputs hold one element)");
  if (k < 0 || k > dim) c.fail("k", std::to_string(k) + " is larger than dim " + std::to_string(axis) + " (" + std::to_string(dim) + ")");
  if (!out.empty()) out[axis] = k;
  c.output_shapes = {out, out};
}

struct NamedRule {
  const char* name;
  ShapeRule rule;
};

const NamedRule kRules[] = {
    {"same", rule_same},           {"same_axis", rule_same_axis},
    {"broadcast", rule_broadcast}, {"reduce", rule_reduce},
    {"reduce_axis", rule_reduce_axis}, {"batch_norm", rule_batch_norm},
    {"layer_norm", rule_layer_norm}, {"group_norm", rule_group_norm},
    {"local_response_norm", rule_local_response_norm},
    {"matmul", rule_matmul},       {"gemm", rule_gemm},
    {"conv2d", rule_conv2d},       {"conv_transpose2d", rule_conv_transpose2d},
    {"pool2d", rule_pool2d},       {"global_pool", rule_global_pool},
    {"attention", rule_attention}, {"reshape", rule_reshape},
    {"transpose", rule_transpose}, {"expand", rule_expand},
    {"slice", rule_slice},         {"concat", rule_concat},
    {"split", rule_split},         {"gather", rule_gather},
    {"gather_elements", rule_gather_elements}, {"scatter", rule_scatter},
    {"embedding", rule_embedding}, {"pad", rule_pad},
    {"tile", rule_tile},           {"resize", rule_resize},
    {"arange", rule_arange},       {"full", rule_full},
    {"topk", rule_topk},
};

}  // namespace

ShapeRule find_shape_rule(const std::string& name) {
  for (const NamedRule& r : kRules) {
    if (name == r.name) return r.rule;
  }
  return nullptr;
}

}  // namespace chipdock
