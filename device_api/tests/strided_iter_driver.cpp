// Cases of chipdock/support/strided_iter.h: every walk is compared with a
// naive multi-index walk (row-major over the iteration shape, NumPy
// broadcasting), through next() and through for_each, for contiguous,
// transposed, negative-stride, zero-stride, broadcast, offset, empty and 0-d
// operands, plus each refusal. Built with UBSan where the compiler has it.
// Prints one line per failed check and exits 1 if any failed.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "chipdock/support/strided_iter.h"
#include "chipdock/support/strided_iter.h"  // the include guard holds

using chipdock::support::StridedIter;

static_assert(std::is_trivially_copyable<StridedIter<3>>::value, "captured by value into enqueued work");

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

struct View {
  std::vector<int64_t> shape, strides;
  int64_t offset_elems = 0;
  cd_tensor_view v{};

  View(void* data, std::vector<int64_t> s, std::vector<int64_t> st, int64_t off = 0, cd_dtype_t dtype = CD_DTYPE_INT32)
      : shape(std::move(s)), strides(std::move(st)), offset_elems(off) {
    v.struct_size = sizeof(cd_tensor_view);
    v.data = data;
    v.byte_offset = off * 4;
    v.shape = shape.empty() ? nullptr : shape.data();
    v.strides = strides.empty() ? nullptr : strides.data();
    v.dtype = dtype;
    v.ndim = static_cast<int32_t>(shape.size());
    v.format = CD_FORMAT_STRIDED;
  }
};

// Element offsets (in elements, from data) that a naive walk of `shape`
// visits in operand `op`.
std::vector<int64_t> naive(const std::vector<int64_t>& shape, const View& op) {
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  std::vector<int64_t> out;
  std::vector<int64_t> index(shape.size(), 0);
  const size_t lead = shape.size() - op.shape.size();
  for (int64_t k = 0; k < total; ++k) {
    int64_t off = op.offset_elems;
    for (size_t d = lead; d < shape.size(); ++d) {
      if (op.shape[d - lead] != 1) off += index[d] * op.strides[d - lead];
    }
    out.push_back(off);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

// Walks `ops` over `shape` both ways and compares every operand's offsets.
template <size_t N>
void check_walk(const char* name, const std::vector<int64_t>& shape, int32_t* base, const std::array<View*, N>& ops) {
  std::array<const cd_tensor_view*, N> views{};
  for (size_t i = 0; i < N; ++i) views[i] = &ops[i]->v;
  char what[256];
  for (int way = 0; way < 2; ++way) {
    StridedIter<N> it(shape.empty() ? nullptr : shape.data(), static_cast<int32_t>(shape.size()), views);
    std::snprintf(what, sizeof what, "%s: no error (%s)", name, it.error() ? it.error() : "");
    expect(it.error() == nullptr, what);
    std::array<std::vector<int64_t>, N> seen;
    if (way == 0) {
      while (!it.done()) {
        for (size_t i = 0; i < N; ++i) seen[i].push_back(reinterpret_cast<int32_t*>(it.ptr(i)) - base);
        it.next();
      }
    } else {
      it.for_each([&](char* const* p) {
        for (size_t i = 0; i < N; ++i) seen[i].push_back(reinterpret_cast<int32_t*>(p[i]) - base);
      });
      expect(it.done(), "done after for_each");
    }
    for (size_t i = 0; i < N; ++i) {
      std::snprintf(what, sizeof what, "%s: operand %zu offsets via %s", name, i, way == 0 ? "next()" : "for_each");
      expect(seen[i] == naive(shape, *ops[i]), what);
    }
    int64_t total = 1;
    for (int64_t d : shape) total *= d;
    std::snprintf(what, sizeof what, "%s: size()", name);
    expect(it.size() == total, what);
  }
}

}  // namespace

int main() {
  std::vector<int32_t> mem(4096);
  int32_t* m = mem.data();

  {  // dense: folds to one run
    View out(m, {2, 3, 4}, {12, 4, 1}), a(m, {2, 3, 4}, {12, 4, 1}, 100);
    check_walk<2>("dense", {2, 3, 4}, m, {&out, &a});
    StridedIter<2> it({&out.v, &a.v});
    expect(it.folded_ndim() == 1, "dense operands fold to one dim");
    int runs = 0;
    it.for_each_run([&](char* const*, const int64_t* step, int64_t count) {
      ++runs;
      expect(count == 24 && step[0] == 4 && step[1] == 4, "dense run: 24 elements, step 4 bytes");
    });
    expect(runs == 1, "dense: one run");
  }
  {  // broadcast a row, a column and a scalar
    View out(m, {2, 3}, {3, 1}), row(m, {3}, {1}, 50), col(m, {2, 1}, {1, 1}, 60), s(m, {}, {}, 70);
    check_walk<4>("broadcast", {2, 3}, m, {&out, &row, &col, &s});
  }
  {  // size-1 dim with a junk stride, a zero-stride (expanded) dim, leading missing dims
    View out(m, {4, 1, 3, 2}, {6, 6, 2, 1}), a(m, {1, 3, 2}, {999, 0, 1}, 10), b(m, {4, 1, 3, 1}, {3, 77, 1, 5}, 20);
    check_walk<3>("size-1 and zero strides", {4, 1, 3, 2}, m, {&out, &a, &b});
  }
  {  // transposed and negative strides, with offsets
    View out(m, {3, 4}, {4, 1}), t(m, {3, 4}, {1, 3}, 200), r(m, {3, 4}, {-4, -1}, 311);
    check_walk<3>("transposed and reversed", {3, 4}, m, {&out, &t, &r});
  }
  {  // a strided slice of a bigger tensor (every other column)
    View out(m, {5, 3}, {3, 1}), a(m, {5, 3}, {8, 2}, 1);
    check_walk<2>("sliced", {5, 3}, m, {&out, &a});
  }
  {  // resuming: for_each after a few next() visits exactly the remaining elements
    View out(m, {3, 4}, {4, 1}), t(m, {3, 4}, {1, 3}, 200);
    StridedIter<2> it({&out.v, &t.v});
    for (int k = 0; k < 6; ++k) it.next();
    std::vector<int64_t> rest;
    it.for_each([&](char* const* p) { rest.push_back(reinterpret_cast<int32_t*>(p[1]) - m); });
    const std::vector<int64_t> all = naive({3, 4}, t);
    expect(rest == std::vector<int64_t>(all.begin() + 6, all.end()), "for_each resumes where next() left off");
    StridedIter<2> copy = it;  // trivially copyable, e.g. into enqueued work
    expect(copy.done() && !copy.next(), "a finished copy stays finished");
  }
  {  // 0-d: one element
    View out(m, {}, {}, 5), a(m, {}, {}, 9);
    check_walk<2>("0-d", {}, m, {&out, &a});
    StridedIter<2> it({&out.v, &a.v});
    int calls = 0;
    it.for_each([&](char* const*) { ++calls; });
    expect(calls == 1, "0-d: one visit");
  }
  {  // empty: nothing visited, NULL data fine
    View out(nullptr, {2, 0, 3}, {0, 3, 1}), a(nullptr, {0, 1}, {1, 1});
    StridedIter<2> it({&out.v, &a.v});
    expect(it.error() == nullptr && it.size() == 0 && it.done(), "empty: no error, size 0, done");
    int calls = 0;
    it.for_each([&](char* const*) { ++calls; });
    expect(calls == 0 && !it.next(), "empty: no visit");
  }
  {  // real work: out = a + b with b broadcast
    std::vector<float> a(6), b(3), out(6, -1.0f);
    for (int i = 0; i < 6; ++i) a[i] = static_cast<float>(i);
    for (int i = 0; i < 3; ++i) b[i] = static_cast<float>(10 * (i + 1));
    View vo(out.data(), {2, 3}, {3, 1}, 0, CD_DTYPE_FLOAT32), va(a.data(), {2, 3}, {3, 1}, 0, CD_DTYPE_FLOAT32),
        vb(b.data(), {3}, {1}, 0, CD_DTYPE_FLOAT32);
    StridedIter<3> it({&vo.v, &va.v, &vb.v});
    it.for_each([](char* const* p) {
      *reinterpret_cast<float*>(p[0]) = *reinterpret_cast<const float*>(p[1]) + *reinterpret_cast<const float*>(p[2]);
    });
    const float want[6] = {10, 21, 32, 13, 24, 35};
    expect(std::memcmp(out.data(), want, sizeof want) == 0, "add with a broadcast row");
    View vd(out.data(), {2, 3}, {3, 1}, 0, CD_DTYPE_FLOAT64);
    StridedIter<1> it64({&vd.v});
    expect(it64.error() == nullptr, "float64 operand accepted");
  }
  {  // refusals name the operand
    View out(m, {2, 3}, {3, 1}), bad(m, {4}, {1}), deep(m, {1, 2, 3}, {6, 3, 1});
    StridedIter<2> a({&out.v, &bad.v});
    expect(a.error() != nullptr && a.error_operand() == 1 && a.size() == 0 && a.done(),
           "a (4,) operand does not broadcast to (2, 3)");
    StridedIter<2> b({&out.v, &deep.v});
    expect(b.error() != nullptr && b.error_operand() == 1, "an operand with more dims is refused");
    View odd(m, {2, 3}, {3, 1}, 0, 99);
    StridedIter<2> c({&out.v, &odd.v});
    expect(c.error() != nullptr && c.error_operand() == 1, "an unknown dtype is refused");
    View blocked(m, {2, 3}, {3, 1});
    blocked.v.format = 7;
    StridedIter<2> d({&out.v, &blocked.v});
    expect(d.error() != nullptr && d.error_operand() == 1, "a non-strided format is refused");
    View huge(m, {2, 3}, {INT64_MAX / 2, 1});
    StridedIter<2> e({&out.v, &huge.v});
    expect(e.error() != nullptr && e.error_operand() == 1, "a byte stride that overflows is refused");
    StridedIter<2> f({nullptr, &out.v});
    expect(f.error() != nullptr, "a NULL operand is refused");
    const int64_t neg[] = {2, -1};
    StridedIter<1> g(neg, 2, {&out.v});
    expect(g.error() != nullptr && g.error_operand() == -1, "a negative iteration dim is refused");
    View nodata(nullptr, {2, 3}, {3, 1});
    StridedIter<2> h({&out.v, &nodata.v});
    expect(h.error() != nullptr && h.error_operand() == 1, "NULL data of a non-empty operand is refused");
  }
  if (failures == 0) std::printf("ok\n");
  return failures == 0 ? 0 : 1;
}
