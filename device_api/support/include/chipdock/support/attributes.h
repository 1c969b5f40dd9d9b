// Backend support library, part of the chipdock backend kit (C++17).
//
// Typed reading of a kernel call's attributes (cd_kernel_context.attributes).
// Which attributes a call carries depends on its launch path (the backend
// guide's "Attributes on each launch path"; core/src/dispatch.cpp):
// - every call through the dispatcher (chipdock.ops, Tensor operators, ONNX
//   sessions, the CPU fallback, conformance's precision cases) carries every
//   attribute the opset declares, defaults filled in and normalized by the
//   shape rule (device_api/opset/README.md, "What a kernel receives");
// - the core's own `copy` launches carry none (copy declares none);
// - a raw launch (chipdock._C.launch_kernel, which a backend's kernel tests
//   use, or a vendor's test calling the kernel directly) carries exactly what
//   its caller passed, unchecked, with no defaults.
// Each reader therefore has a form with a fallback (pass the opset's default)
// for a kernel that also serves raw launches. A wrong type, a missing required attribute or a malformed array
// throws Error(INVALID_ARGUMENT) naming the attribute, so every backend reports
// attribute errors the same way.
#ifndef CHIPDOCK_SUPPORT_ATTRIBUTES_H_
#define CHIPDOCK_SUPPORT_ATTRIBUTES_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "chipdock/cd_kernel.h"

namespace chipdock::support {

// The attribute called `name`, or NULL when the call has none.
const cd_attribute* find_attribute(const cd_kernel_context* ctx, const char* name);

// The attribute called `name`; throws if the call has none.
const cd_attribute& required_attribute(const cd_kernel_context* ctx, const char* name);

// CD_ATTR_INT.
int64_t int_attribute(const cd_kernel_context* ctx, const char* name);
int64_t int_attribute(const cd_kernel_context* ctx, const char* name, int64_t fallback);

// CD_ATTR_INT holding 0 or 1 (the opset's bool).
bool bool_attribute(const cd_kernel_context* ctx, const char* name);

// CD_ATTR_FLOAT, or CD_ATTR_INT converted (an integral literal in a spec).
double float_attribute(const cd_kernel_context* ctx, const char* name);
double float_attribute(const cd_kernel_context* ctx, const char* name, double fallback);

// CD_ATTR_STRING.
std::string string_attribute(const cd_kernel_context* ctx, const char* name);

// CD_ATTR_STRING naming one of `choices` (the opset's `choices:`): its index,
// 0 (the first choice, the default) when absent; any other string throws,
// listing the choices.
size_t choice_attribute(const cd_kernel_context* ctx, const char* name,
                        std::initializer_list<const char*> choices);

// CD_ATTR_INTS (any length, 0 included).
std::vector<int64_t> ints_attribute(const cd_kernel_context* ctx, const char* name);
std::vector<int64_t> ints_attribute(const cd_kernel_context* ctx, const char* name,
                                    const std::vector<int64_t>& fallback);

// CD_ATTR_INTS of exactly `length` values, `fallback` when absent.
std::vector<int64_t> ints_attribute(const cd_kernel_context* ctx, const char* name,
                                    const std::vector<int64_t>& fallback, size_t length);

// CD_ATTR_FLOATS, or CD_ATTR_INTS converted.
std::vector<double> floats_attribute(const cd_kernel_context* ctx, const char* name);

// The window attributes that convolutions and pools share: `stride` (absent
// or empty: `default_stride`), `padding` (top, left, bottom, right; default 0)
// and, where the op has it, `dilation` (default 1), each checked (stride and
// dilation >= 1, padding >= 0).
struct Window2d {
  int64_t sh = 1, sw = 1;                  // stride
  int64_t dh = 1, dw = 1;                  // dilation
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // padding
};
Window2d window2d_attributes(const cd_kernel_context* ctx, const std::vector<int64_t>& default_stride,
                             bool has_dilation);

}  // namespace chipdock::support

#endif  // CHIPDOCK_SUPPORT_ATTRIBUTES_H_
