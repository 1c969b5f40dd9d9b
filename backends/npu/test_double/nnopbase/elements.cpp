// Element access for the simulated ops: dtype facts, raw conversions
// (floats correctly rounded once, round-to-nearest-even, from double or
// from int64 directly; ints wrap), HostTensor and Index.
#include <cmath>
#include <cstring>
#include <limits>

#include "sim.h"

namespace cdsim {
namespace {

// A binary floating-point format narrower than double.
struct Format {
  int exponent_bits;
  int mantissa_bits;  // stored fraction bits
};
constexpr Format kHalf{5, 10};
constexpr Format kBfloat16{8, 7};

// The bit pattern of (-1)^negative * significand * 2^exponent (+ a sticky
// tail below it when `sticky`), rounded once to `f` with ties to even.
uint32_t round_to_format(bool negative, uint64_t significand, int exponent, bool sticky, Format f) {
  const uint32_t sign = negative ? uint32_t{1} << (f.exponent_bits + f.mantissa_bits) : 0;
  const uint32_t infinity = ((uint32_t{1} << f.exponent_bits) - 1) << f.mantissa_bits;
  if (significand == 0) return sign;  // a sticky tail alone cannot happen: callers pass it with bits
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const int emin = 1 - bias;
  const int msb = 63 - __builtin_clzll(significand);
  const int e = msb + exponent;  // value in [2^e, 2^(e+1))
  if (e > bias) return sign | infinity;
  // The weight of the result's last mantissa bit (normal or subnormal).
  const int quantum = (e < emin ? emin : e) - f.mantissa_bits;
  const int shift = quantum - exponent;
  unsigned __int128 kept;
  if (shift <= 0) {
    kept = static_cast<unsigned __int128>(significand) << (-shift);  // exact
  } else if (shift > 64) {
    kept = 0;  // far below half a quantum: rounds to zero
  } else {
    const unsigned __int128 wide = significand;
    kept = wide >> shift;
    const unsigned __int128 rest = wide & ((static_cast<unsigned __int128>(1) << shift) - 1);
    const unsigned __int128 half = static_cast<unsigned __int128>(1) << (shift - 1);
    if (rest > half || (rest == half && (sticky || (kept & 1)))) ++kept;
  }
  const uint64_t implicit = uint64_t{1} << f.mantissa_bits;
  int biased = quantum + f.mantissa_bits + bias;  // exponent field when kept is normal
  if (kept >= 2 * implicit) {  // rounding carried into a new binade
    kept >>= 1;
    ++biased;
  }
  if (kept < implicit) return sign | static_cast<uint32_t>(kept);  // subnormal (or zero), field 0
  if (biased >= (1 << f.exponent_bits) - 1) return sign | infinity;
  return sign | (static_cast<uint32_t>(biased) << f.mantissa_bits) | static_cast<uint32_t>(kept - implicit);
}

uint32_t from_double(double value, Format f) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const bool negative = bits >> 63;
  const int field = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t fraction = bits & ((uint64_t{1} << 52) - 1);
  const uint32_t sign = negative ? uint32_t{1} << (f.exponent_bits + f.mantissa_bits) : 0;
  const uint32_t all_ones = ((uint32_t{1} << f.exponent_bits) - 1) << f.mantissa_bits;
  if (field == 0x7ff) {
    if (fraction == 0) return sign | all_ones;
    // NaN: keep the payload's top bits, and make it quiet.
    const uint32_t payload = static_cast<uint32_t>(fraction >> (52 - f.mantissa_bits));
    return sign | all_ones | payload | (uint32_t{1} << (f.mantissa_bits - 1));
  }
  if (field == 0) return round_to_format(negative, fraction, -1074, false, f);
  return round_to_format(negative, fraction | (uint64_t{1} << 52), field - 1075, false, f);
}

uint32_t from_int(int64_t value, Format f) {
  const bool negative = value < 0;
  const uint64_t magnitude = negative ? uint64_t{0} - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  return round_to_format(negative, magnitude, 0, false, f);
}

double to_double(uint32_t bits, Format f) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const bool negative = (bits >> (f.exponent_bits + f.mantissa_bits)) & 1;
  const uint32_t field = (bits >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1);
  const uint32_t fraction = bits & ((1u << f.mantissa_bits) - 1);
  double magnitude;
  if (field == (1u << f.exponent_bits) - 1) {
    magnitude = fraction ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (field == 0) {
    magnitude = std::ldexp(static_cast<double>(fraction), 1 - bias - f.mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(fraction | (1u << f.mantissa_bits)),
                           static_cast<int>(field) - bias - f.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

// double -> the low 64 bits of its integer part (truncated toward zero,
// wrapped modulo 2^64); NaN and infinities give 0.
uint64_t wrap_to_u64(double value) {
  if (!std::isfinite(value)) return 0;
  const double whole = std::trunc(value);
  const double reduced = std::fmod(whole, 18446744073709551616.0);  // exact
  if (reduced >= 0) return static_cast<uint64_t>(reduced);
  return uint64_t{0} - static_cast<uint64_t>(-reduced);
}

[[noreturn]] void no_conversion(aclDataType dtype) {
  raise(CD_ACLNN_ERR_PARAM_INVALID, "the simulated runtime has no element conversion for dtype %s",
        dtype_name(dtype));
}

template <typename T>
T read(const void* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

template <typename T>
void write(void* p, T value) {
  std::memcpy(p, &value, sizeof value);
}

}  // namespace

size_t dtype_bytes(aclDataType dtype) noexcept {
  switch (dtype) {
    case ACL_INT8: case ACL_UINT8: case ACL_BOOL: return 1;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16: return 2;
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: return 4;
    case ACL_DOUBLE: case ACL_INT64: case ACL_UINT64: case ACL_COMPLEX64: return 8;
    case ACL_COMPLEX128: return 16;
    default: return 0;
  }
}

bool is_floating(aclDataType dtype) noexcept {
  return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16 || dtype == ACL_DOUBLE;
}

const char* dtype_name(aclDataType dtype) noexcept {
  switch (dtype) {
    case ACL_DT_UNDEFINED: return "ACL_DT_UNDEFINED";
    case ACL_FLOAT: return "ACL_FLOAT";
    case ACL_FLOAT16: return "ACL_FLOAT16";
    case ACL_INT8: return "ACL_INT8";
    case ACL_INT32: return "ACL_INT32";
    case ACL_UINT8: return "ACL_UINT8";
    case ACL_INT16: return "ACL_INT16";
    case ACL_UINT16: return "ACL_UINT16";
    case ACL_UINT32: return "ACL_UINT32";
    case ACL_INT64: return "ACL_INT64";
    case ACL_UINT64: return "ACL_UINT64";
    case ACL_DOUBLE: return "ACL_DOUBLE";
    case ACL_BOOL: return "ACL_BOOL";
    case ACL_STRING: return "ACL_STRING";
    case ACL_COMPLEX64: return "ACL_COMPLEX64";
    case ACL_COMPLEX128: return "ACL_COMPLEX128";
    case ACL_BF16: return "ACL_BF16";
    case ACL_INT4: return "ACL_INT4";
    case ACL_UINT1: return "ACL_UINT1";
    case ACL_COMPLEX32: return "ACL_COMPLEX32";
    case ACL_HIFLOAT8: return "ACL_HIFLOAT8";
    case ACL_FLOAT8_E5M2: return "ACL_FLOAT8_E5M2";
    case ACL_FLOAT8_E4M3FN: return "ACL_FLOAT8_E4M3FN";
    case ACL_FLOAT8_E8M0: return "ACL_FLOAT8_E8M0";
    default: return "an unknown aclDataType";
  }
}

double load_double(const void* p, aclDataType dtype) {
  switch (dtype) {
    case ACL_FLOAT: return read<float>(p);
    case ACL_FLOAT16: return to_double(read<uint16_t>(p), kHalf);
    case ACL_BF16: return to_double(read<uint16_t>(p), kBfloat16);
    case ACL_DOUBLE: return read<double>(p);
    case ACL_UINT64: return static_cast<double>(read<uint64_t>(p));
    default: return static_cast<double>(load_int(p, dtype));
  }
}

int64_t load_int(const void* p, aclDataType dtype) {
  switch (dtype) {
    case ACL_INT8: return read<int8_t>(p);
    case ACL_UINT8: return read<uint8_t>(p);
    case ACL_INT16: return read<int16_t>(p);
    case ACL_UINT16: return read<uint16_t>(p);
    case ACL_INT32: return read<int32_t>(p);
    case ACL_UINT32: return read<uint32_t>(p);
    case ACL_INT64: return read<int64_t>(p);
    case ACL_UINT64: return static_cast<int64_t>(read<uint64_t>(p));
    case ACL_BOOL: return read<uint8_t>(p) != 0;
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16: case ACL_DOUBLE:
      return static_cast<int64_t>(wrap_to_u64(load_double(p, dtype)));
    default: no_conversion(dtype);
  }
}

void store_double(void* p, aclDataType dtype, double value) {
  switch (dtype) {
    case ACL_FLOAT: write(p, static_cast<float>(value)); return;  // the FPU rounds once, RNE
    case ACL_FLOAT16: write(p, static_cast<uint16_t>(from_double(value, kHalf))); return;
    case ACL_BF16: write(p, static_cast<uint16_t>(from_double(value, kBfloat16))); return;
    case ACL_DOUBLE: write(p, value); return;
    case ACL_BOOL: write(p, static_cast<uint8_t>(value != 0)); return;  // NaN is true, as in C
    default: store_int(p, dtype, static_cast<int64_t>(wrap_to_u64(value))); return;
  }
}

void store_int(void* p, aclDataType dtype, int64_t value) {
  const uint64_t bits = static_cast<uint64_t>(value);
  switch (dtype) {
    case ACL_INT8: case ACL_UINT8: write(p, static_cast<uint8_t>(bits)); return;
    case ACL_INT16: case ACL_UINT16: write(p, static_cast<uint16_t>(bits)); return;
    case ACL_INT32: case ACL_UINT32: write(p, static_cast<uint32_t>(bits)); return;
    case ACL_INT64: case ACL_UINT64: write(p, bits); return;
    case ACL_BOOL: write(p, static_cast<uint8_t>(value != 0)); return;
    // Straight from the integer: going through double first would round twice.
    case ACL_FLOAT: write(p, static_cast<float>(value)); return;
    case ACL_DOUBLE: write(p, static_cast<double>(value)); return;
    case ACL_FLOAT16: write(p, static_cast<uint16_t>(from_int(value, kHalf))); return;
    case ACL_BF16: write(p, static_cast<uint16_t>(from_int(value, kBfloat16))); return;
    default: no_conversion(dtype);
  }
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

HostTensor::HostTensor(const TensorInfo& info) : info_(info), numel_(info.numel()) {
  const size_t bytes = dtype_bytes(info_.dtype);
  if (bytes == 0) raise(CD_ACLNN_ERR_PARAM_INVALID, "a tensor of dtype %s has no host access", dtype_name(info_.dtype));
  if (info_.strides.size() != info_.shape.size())
    raise(CD_ACLNN_ERR_PARAM_INVALID, "a tensor has %zu dims but %zu strides", info_.shape.size(), info_.strides.size());
  if (numel_ == 0) return;
  int64_t lowest = info_.offset, highest = info_.offset;
  for (size_t d = 0; d < info_.shape.size(); ++d) {
    const int64_t reach = (info_.shape[d] - 1) * info_.strides[d];
    (reach < 0 ? lowest : highest) += reach;
  }
  if (lowest < 0)
    raise(CD_ACLNN_ERR_PARAM_INVALID, "a tensor view reaches element %lld before its storage start",
          static_cast<long long>(lowest));
  // The whole reach of the view must lie in one live device allocation.
  base_ = host_pointer(info_.data, static_cast<size_t>(highest + 1) * bytes, "tensor data");
}

char* HostTensor::element(int64_t linear) const {
  if (linear < 0 || linear >= numel_)
    raise(CD_ACLNN_ERR_INNER, "element %lld of a tensor of %lld elements", static_cast<long long>(linear),
          static_cast<long long>(numel_));
  int64_t offset = info_.offset;
  for (size_t d = info_.shape.size(); d-- > 0;) {
    const int64_t extent = info_.shape[d];
    offset += (linear % extent) * info_.strides[d];
    linear /= extent;
  }
  return base_ + offset * static_cast<int64_t>(dtype_bytes(info_.dtype));
}

char* HostTensor::element_at(const std::vector<int64_t>& index) const {
  if (index.size() != info_.shape.size())
    raise(CD_ACLNN_ERR_INNER, "an index of %zu dims into a tensor of %zu", index.size(), info_.shape.size());
  int64_t offset = info_.offset;
  for (size_t d = 0; d < index.size(); ++d) {
    if (index[d] < 0 || index[d] >= info_.shape[d])
      raise(CD_ACLNN_ERR_INNER, "index %lld out of range for dim %zu of size %lld", static_cast<long long>(index[d]), d,
            static_cast<long long>(info_.shape[d]));
    offset += index[d] * info_.strides[d];
  }
  return base_ + offset * static_cast<int64_t>(dtype_bytes(info_.dtype));
}

double HostTensor::get(int64_t linear) const { return load_double(element(linear), info_.dtype); }
int64_t HostTensor::get_int(int64_t linear) const { return load_int(element(linear), info_.dtype); }
void HostTensor::set(int64_t linear, double value) const { store_double(element(linear), info_.dtype, value); }
void HostTensor::set_int(int64_t linear, int64_t value) const { store_int(element(linear), info_.dtype, value); }

Index::Index(std::vector<int64_t> shape) : shape_(std::move(shape)), index_(shape_.size(), 0) {
  for (int64_t d : shape_) valid_ = valid_ && d > 0;
}

void Index::next() {
  ++linear_;
  for (size_t d = shape_.size(); d-- > 0;) {
    if (++index_[d] < shape_[d]) return;
    index_[d] = 0;
  }
  valid_ = false;  // carried out of the first dim (or a 0-d tensor's single element is done)
}

}  // namespace cdsim
