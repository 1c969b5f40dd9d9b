// Boundary cases of chipdock/support/checked_math.h, built with UBSan where
// the compiler has it (a wrapped intermediate would be reported). Prints one
// line per failed check and exits 1 if any failed.
#include <cstdint>
#include <cstdio>

#include "chipdock/support/checked_math.h"
#include "chipdock/support/checked_math.h"  // the include guard holds

using namespace chipdock::support;

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  const int64_t max = INT64_MAX, min = INT64_MIN;
  expect(checked_mul(3, 4) == 12, "3 * 4");
  expect(checked_mul(max, 1) == max, "max * 1");
  expect(!checked_mul(max, 2), "max * 2 overflows");
  expect(!checked_mul(4, (int64_t{1} << 62) + 1), "4 * (2^62 + 1) overflows (the tile repro)");
  expect(!checked_mul(min, -1), "min * -1 overflows");
  expect(checked_mul(min, 1) == min, "min * 1");
  expect(checked_add(max - 1, 1) == max, "max - 1 + 1");
  expect(!checked_add(max, 1), "max + 1 overflows");
  expect(!checked_add(3, max), "3 + max overflows (the pad repro)");
  expect(!checked_sub(min, 1), "min - 1 overflows");
  expect(checked_sub(0, max) == -max, "0 - max");

  const int64_t s3[] = {2, 3, 4};
  expect(checked_numel(s3, 3) == 24, "numel (2, 3, 4)");
  expect(checked_numel(nullptr, 0) == 1, "numel of 0-d");
  const int64_t neg[] = {2, -1};
  expect(!checked_numel(neg, 2), "a negative dim");
  const int64_t empty[] = {0, 5};
  expect(checked_numel(empty, 2) == 0, "numel (0, 5)");
  const int64_t huge_empty[] = {int64_t{1} << 62, 0, 4};
  expect(!checked_numel(huge_empty, 3), "(2^62, 0, 4): its contiguous strides overflow");
  const int64_t big[] = {int64_t{1} << 31, int64_t{1} << 31, 2};
  expect(!checked_numel(big, 3), "2^63 elements overflow");

  expect(checked_nbytes(3, 8) == 24u, "3 float64");
  expect(!checked_nbytes((int64_t{1} << 61) + 1, 8), "(2^61 + 1) float64 (the empty repro)");
  expect(checked_nbytes(int64_t{1} << 60, 4) == size_t{1} << 62, "2^60 float32");

  const int64_t shape[] = {3, 4}, strides[] = {4, 1};
  auto e = checked_view_extent(shape, strides, 2);
  expect(e && e->lo == 0 && e->hi == 11, "extent of a contiguous (3, 4)");
  const int64_t flipped[] = {-4, 1};
  e = checked_view_extent(shape, flipped, 2);
  expect(e && e->lo == -8 && e->hi == 3, "extent with a negative stride");
  const int64_t one[] = {(int64_t{1} << 62) + 1}, four[] = {4};
  expect(!checked_view_extent(one, four, 1), "(2^62 + 1,) strides (4,) (the as_strided repro)");
  const int64_t sq[] = {4, 4}, sq_strides[] = {max - 1, max - 1};
  expect(!checked_view_extent(sq, sq_strides, 2), "two reaches that overflow only summed");

  auto span = checked_view_span(shape, strides, 2, 2, 4);
  expect(span && span->lo == 8 && span->hi == 56, "span of (3, 4) float32 at offset 2");
  expect(!checked_view_span(shape, strides, 2, max - 5, 1), "offset + reach + 1 overflows");
  expect(!checked_view_span(shape, strides, 2, int64_t{1} << 61, 8), "the byte offset overflows");
  return failures == 0 ? 0 : 1;
}
