// The dispatcher: one op call from arguments to outputs. It checks the
// arguments against the opset, infers output shapes and dtypes, normalizes
// attributes, allocates outputs through the caching allocator on the current
// stream, finds the device's kernel by (op, dtype signature), and when there
// is none (or the op is denied on that device) applies the CPU fallback
// policy, counting every fallback.
#pragma once

#include <string>
#include <vector>

#include "opset.hpp"

namespace chipdock {

enum class FallbackPolicy { Error = 0, Warn = 1, Allow = 2 };

struct DispatchResult {
  std::vector<Tensor> outputs;
  // Set when the call ran on the CPU reference under the `warn` policy and
  // this (device type, op, signature) had not fallen back before: the
  // binding turns it into one warning.
  std::string warning;
};

// `inputs` has one entry per declared input: empty when an optional input
// is absent, several tensors for a variadic one. `device` is used when no
// input is given (creation ops). Throws Error naming the op and argument.
DispatchResult dispatch(const OpSpec& op, std::vector<std::vector<Tensor>> inputs, const std::vector<Attribute>& given,
                        Device* device);

void set_fallback_policy(FallbackPolicy policy);
FallbackPolicy fallback_policy();
// Ops on `device_type` that always take the fallback, even with a kernel.
void set_denied_ops(const std::string& device_type, const std::vector<std::string>& ops);
std::vector<std::string> denied_ops(const std::string& device_type);

// The manifest's `unsupported` list of the backend providing `device_type`
// (replaces the list): a fallback of an op it declares takes the entry's
// reason ("declared unsupported: <reason>") instead of "no kernel". An entry
// matches an (op, signature) when its op is the op and its dtypes are empty,
// name a dtype of the signature, or name the signature's label (its distinct
// dtype names joined by '-', as the coverage report writes it); the first
// entry that matches wins.
struct DeclaredUnsupported {
  std::string op;
  std::vector<std::string> dtypes;
  std::string reason;
};
void set_declared_unsupported(const std::string& device_type, const std::vector<DeclaredUnsupported>& entries);

struct FallbackRecord {
  std::string device_type;
  std::string op;
  std::string signature;  // "(float16, float16, float16)"
  uint64_t count = 0;
  std::string reason;     // "no kernel" or "denied"
};
std::vector<FallbackRecord> fallback_records();
void reset_fallback_records();

}  // namespace chipdock
