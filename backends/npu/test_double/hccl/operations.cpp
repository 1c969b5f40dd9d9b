// The simulated HCCL's operations: the collectives, point-to-point, groups
// and HcclBatchSendRecv, each validated when called (as HCCL does: dtype and
// op per the Atlas A2 tables of CANN's HCCL API reference, pointers, stream)
// and executed as one task on the caller's stream (see hccl_sim.h).
//
// A collective's task publishes its rank's input in a data segment, meets
// the other ranks at a barrier, computes its output from the peers'
// segments into device memory, and meets them again before its segment
// goes. A send publishes and waits until the receiver took it, so that a
// ring of sends and receives without a group deadlocks as with HCCL (until
// HCCL_EXEC_TIMEOUT); a group or a batch publishes every send first.
#include <acl/acl.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "hccl_sim.h"
#include "sim.h"

namespace cdsim::hccl {

size_t dtype_size(HcclDataType type) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_UINT8: return 1;
    case HCCL_DATA_TYPE_INT16:
    case HCCL_DATA_TYPE_UINT16:
    case HCCL_DATA_TYPE_FP16:
    case HCCL_DATA_TYPE_BFP16: return 2;
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_UINT32:
    case HCCL_DATA_TYPE_FP32: return 4;
    case HCCL_DATA_TYPE_INT64:
    case HCCL_DATA_TYPE_UINT64:
    case HCCL_DATA_TYPE_FP64: return 8;
    default: return 0;
  }
}

const char* dtype_name(HcclDataType type) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8: return "int8";
    case HCCL_DATA_TYPE_INT16: return "int16";
    case HCCL_DATA_TYPE_INT32: return "int32";
    case HCCL_DATA_TYPE_FP16: return "fp16";
    case HCCL_DATA_TYPE_FP32: return "fp32";
    case HCCL_DATA_TYPE_INT64: return "int64";
    case HCCL_DATA_TYPE_UINT64: return "uint64";
    case HCCL_DATA_TYPE_UINT8: return "uint8";
    case HCCL_DATA_TYPE_UINT16: return "uint16";
    case HCCL_DATA_TYPE_UINT32: return "uint32";
    case HCCL_DATA_TYPE_FP64: return "fp64";
    case HCCL_DATA_TYPE_BFP16: return "bfp16";
    default: return "unsupported";
  }
}

namespace {

// ---- validation, as HCCL does it on Atlas A2 ----

// Data movement (broadcast, all-gather, send, recv) takes every type of
// HcclDataType up to bfp16: the bytes move unchanged.
size_t movement_size(HcclDataType type, const char* call) {
  const size_t size = dtype_size(type);
  if (size == 0) fail(HCCL_E_PARA, "%s: dataType %d is not supported", call, static_cast<int>(type));
  return size;
}

// Reductions: int8, int16, int32, int64, fp16, fp32, bfp16; "prod" not for
// int16 or bfp16 (HcclAllReduce / HcclReduce / HcclReduceScatter, Atlas A2).
size_t reduction_size(HcclDataType type, HcclReduceOp op, const char* call) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_INT16:
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_INT64:
    case HCCL_DATA_TYPE_FP16:
    case HCCL_DATA_TYPE_FP32:
    case HCCL_DATA_TYPE_BFP16: break;
    default:
      fail(HCCL_E_PARA, "%s: dataType %s (%d) is not supported for reductions", call, dtype_name(type),
           static_cast<int>(type));
  }
  if (op != HCCL_REDUCE_SUM && op != HCCL_REDUCE_PROD && op != HCCL_REDUCE_MAX && op != HCCL_REDUCE_MIN) {
    fail(HCCL_E_PARA, "%s: op %d is not a reduction (sum 0, prod 1, max 2, min 3)", call, static_cast<int>(op));
  }
  if (op == HCCL_REDUCE_PROD && (type == HCCL_DATA_TYPE_INT16 || type == HCCL_DATA_TYPE_BFP16)) {
    fail(HCCL_E_NOT_SUPPORT, "%s: op prod does not support dataType %s", call, dtype_name(type));
  }
  return dtype_size(type);
}

uint64_t checked_bytes(uint64_t count, size_t size, uint64_t ranks, const char* call) {
  if (count > std::numeric_limits<uint64_t>::max() / size / ranks) {
    fail(HCCL_E_PARA, "%s: count %llu overflows", call, static_cast<unsigned long long>(count));
  }
  return count * size * ranks;
}

void check_buffer(const void* buffer, uint64_t bytes, const char* what, const char* call) {
  if (bytes == 0) return;
  if (buffer == nullptr) fail(HCCL_E_PTR, "%s: %s is NULL", call, what);
  if (!cdsim::is_device_pointer(buffer)) fail(HCCL_E_PTR, "%s: %s %p is not device memory", call, what, buffer);
}

void check_stream(const Comm& comm, aclrtStream stream, const char* call) {
  if (stream == nullptr) fail(HCCL_E_PTR, "%s: stream is NULL", call);
  int32_t device = -1;
  try {
    device = cdsim::stream_device(stream);
  } catch (const cdsim::SimError& e) {
    fail(HCCL_E_PARA, "%s: %s", call, e.message.c_str());
  }
  if (device != comm.device) {
    fail(HCCL_E_PARA, "%s: the stream belongs to device %d, the communicator (rank %u) to device %d", call, device,
         comm.rank, comm.device);
  }
}

void check_rank(const Comm& comm, uint32_t rank, const char* what, const char* call) {
  if (rank >= comm.nranks) fail(HCCL_E_PARA, "%s: %s %u is not in [0, %u)", call, what, rank, comm.nranks);
}

// ---- element arithmetic: every value through double (floats) or int64 ----

double decode_float(uint32_t bits, int exp_bits, int mant_bits) {
  const uint32_t exp_all = (1u << exp_bits) - 1;
  const int bias = static_cast<int>(exp_all >> 1);
  const bool negative = (bits >> (exp_bits + mant_bits)) & 1u;
  const uint32_t exponent = (bits >> mant_bits) & exp_all;
  const uint32_t mantissa = bits & ((1u << mant_bits) - 1);
  double value;
  if (exponent == exp_all) {
    value = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    value = std::ldexp(static_cast<double>(mantissa), 1 - bias - mant_bits);
  } else {
    value = std::ldexp(static_cast<double>(mantissa | (1u << mant_bits)), static_cast<int>(exponent) - bias - mant_bits);
  }
  return negative ? -value : value;
}

// `value` rounded once (to nearest, ties to even) to a binary format.
uint32_t encode_float(double value, int exp_bits, int mant_bits) {
  const uint32_t exp_all = (1u << exp_bits) - 1;
  const int bias = static_cast<int>(exp_all >> 1);
  const uint32_t sign = std::signbit(value) ? 1u << (exp_bits + mant_bits) : 0u;
  if (std::isnan(value)) return sign | (exp_all << mant_bits) | (1u << (mant_bits - 1));
  const double magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return sign | (exp_all << mant_bits);
  if (magnitude == 0) return sign;
  int e = 0;
  std::frexp(magnitude, &e);          // magnitude in [2^(e-1), 2^e)
  int exponent = std::max(e - 1, 1 - bias);  // subnormals share the smallest scale
  double m = std::nearbyint(std::ldexp(magnitude, mant_bits - exponent));
  if (m >= std::ldexp(1.0, mant_bits + 1)) {
    m = std::ldexp(m, -1);
    ++exponent;
  }
  const uint32_t units = static_cast<uint32_t>(m);
  if (units < (1u << mant_bits)) return sign | units;  // subnormal (or rounded to zero)
  const int biased = exponent + bias;
  if (biased >= static_cast<int>(exp_all)) return sign | (exp_all << mant_bits);
  return sign | (static_cast<uint32_t>(biased) << mant_bits) | (units - (1u << mant_bits));
}

double load_float(const char* p, HcclDataType type) {
  switch (type) {
    case HCCL_DATA_TYPE_FP32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case HCCL_DATA_TYPE_FP16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return decode_float(bits, 5, 10);
    }
    default: {  // bfp16
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return decode_float(bits, 8, 7);
    }
  }
}

void store_float(char* p, HcclDataType type, double value) {
  switch (type) {
    case HCCL_DATA_TYPE_FP32: {
      const float f = static_cast<float>(value);  // correctly rounded
      std::memcpy(p, &f, 4);
      return;
    }
    case HCCL_DATA_TYPE_FP16: {
      const uint16_t bits = static_cast<uint16_t>(encode_float(value, 5, 10));
      std::memcpy(p, &bits, 2);
      return;
    }
    default: {
      const uint16_t bits = static_cast<uint16_t>(encode_float(value, 8, 7));
      std::memcpy(p, &bits, 2);
      return;
    }
  }
}

int64_t load_int(const char* p, HcclDataType type) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case HCCL_DATA_TYPE_INT16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case HCCL_DATA_TYPE_INT32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    default: { int64_t v; std::memcpy(&v, p, 8); return v; }
  }
}

// Stores the low bits: integer sums and products wrap, as on the device.
void store_int(char* p, HcclDataType type, uint64_t value) {
  std::memcpy(p, &value, dtype_size(type));  // little-endian: the low bytes
}

bool is_float(HcclDataType type) {
  return type == HCCL_DATA_TYPE_FP32 || type == HCCL_DATA_TYPE_FP16 || type == HCCL_DATA_TYPE_BFP16;
}

// out[i] = op over r of inputs[r][i]. Floats are combined in double and
// rounded once; integers wrap in two's complement.
void reduce(char* out, const std::vector<const char*>& inputs, uint64_t count, HcclDataType type, HcclReduceOp op) {
  const size_t size = dtype_size(type);
  for (uint64_t i = 0; i < count; ++i) {
    const size_t at = i * size;
    if (is_float(type)) {
      double acc = load_float(inputs[0] + at, type);
      for (size_t r = 1; r < inputs.size(); ++r) {
        const double v = load_float(inputs[r] + at, type);
        switch (op) {
          case HCCL_REDUCE_SUM: acc += v; break;
          case HCCL_REDUCE_PROD: acc *= v; break;
          case HCCL_REDUCE_MAX: acc = (std::isnan(acc) || v > acc || std::isnan(v)) ? (std::isnan(acc) ? acc : v) : acc; break;
          default: acc = (std::isnan(acc) || v < acc || std::isnan(v)) ? (std::isnan(acc) ? acc : v) : acc; break;
        }
      }
      store_float(out + at, type, acc);
    } else {
      int64_t first = load_int(inputs[0] + at, type);
      uint64_t acc = static_cast<uint64_t>(first);
      int64_t best = first;
      for (size_t r = 1; r < inputs.size(); ++r) {
        const int64_t v = load_int(inputs[r] + at, type);
        switch (op) {
          case HCCL_REDUCE_SUM: acc += static_cast<uint64_t>(v); break;
          case HCCL_REDUCE_PROD: acc *= static_cast<uint64_t>(v); break;
          case HCCL_REDUCE_MAX: best = std::max(best, v); break;
          default: best = std::min(best, v); break;
        }
      }
      const bool extreme = op == HCCL_REDUCE_MAX || op == HCCL_REDUCE_MIN;
      store_int(out + at, type, extreme ? static_cast<uint64_t>(best) : acc);
    }
  }
}

// ---- the data plane of one operation on one rank ----

std::string collective_segment(const Comm& comm, uint64_t id, uint32_t rank) {
  return format_message("%s-c%llu-r%u", comm.name.c_str(), static_cast<unsigned long long>(id), rank);
}

std::string message_segment(const Comm& comm, uint32_t src, uint32_t dst, uint64_t sequence) {
  return format_message("%s-p%u-%u-%llu", comm.name.c_str(), src, dst, static_cast<unsigned long long>(sequence));
}

int64_t exec_deadline(const Comm& comm) { return now_ns() + comm.exec_timeout_s * 1000000000; }

// Waits (lock held) until `done` or a peer failed or the deadline passed;
// `missing` names who is late for the timeout message.
template <typename Done, typename Missing>
void wait_for(Lock& lock, Comm& comm, const char* call, int64_t deadline, Done done, Missing missing) {
  for (;;) {
    check_peers(comm, call);
    if (done()) return;
    if (!lock.wait_until(deadline)) {
      check_peers(comm, call);
      if (done()) return;
      fail(HCCL_E_TIMEOUT, "%s on rank %u of %u: %s within %lld s (HCCL_EXEC_TIMEOUT)", call, comm.rank, comm.nranks,
           missing().c_str(), static_cast<long long>(comm.exec_timeout_s));
    }
  }
}

// Every rank reaches its next barrier (the collectives' rendezvous).
void barrier(Comm& comm, const char* call, int64_t deadline) {
  const uint64_t target = comm.barriers.fetch_add(1) + 1;
  Shared* shared = comm.shared;
  Lock lock(shared);
  shared->barrier[comm.rank] = target;
  notify_all(shared);
  wait_for(
      lock, comm, call, deadline,
      [&] {
        for (uint32_t r = 0; r < comm.nranks; ++r) {
          if (shared->barrier[r] < target) return false;
        }
        return true;
      },
      [&] {
        std::string late;
        for (uint32_t r = 0; r < comm.nranks; ++r) {
          if (shared->barrier[r] >= target) continue;
          late += (late.empty() ? "" : ", ") + std::to_string(r);
        }
        return "rank(s) " + late + " did not take part";
      });
}

// One collective on one rank: `publish` bytes of its input, then `compute`
// once every rank published, reading rank r's input with `input(r)`.
struct Collective {
  const char* call;
  uint64_t id;
  const void* input;      // device address of what this rank contributes (may be NULL with 0 bytes)
  uint64_t input_bytes;
  uint64_t peer_bytes;    // what each rank's segment holds
  std::function<void(Comm&, const std::function<const char*(uint32_t)>&)> compute;
};

void run_collective(Comm& comm, const Collective& op) {
  const int64_t deadline = exec_deadline(comm);
  Segment mine = Segment::create(collective_segment(comm, op.id, comm.rank), op.input_bytes);
  if (op.input_bytes > 0) {
    std::memcpy(mine.data(), cdsim::host_pointer(op.input, op.input_bytes, "sendBuf"), op.input_bytes);
  }
  barrier(comm, op.call, deadline);
  std::vector<Segment> peers(comm.nranks);
  auto input = [&](uint32_t r) -> const char* {
    if (r == comm.rank) return mine.data();
    if (peers[r].data() == nullptr && op.peer_bytes > 0) {
      const std::string what = format_message("%s: rank %u's input", op.call, r);
      peers[r] = Segment::open(collective_segment(comm, op.id, r), op.peer_bytes, what.c_str());
    }
    return peers[r].data();
  };
  op.compute(comm, input);
  peers.clear();
  barrier(comm, op.call, deadline);
}

// The acl code a failed HCCL task leaves on its stream.
int32_t stream_code(HcclResult code) {
  switch (code) {
    case HCCL_E_TIMEOUT: return ACL_ERROR_RT_TASK_TIMEOUT;
    case HCCL_E_REMOTE: return ACL_ERROR_RT_SUSPECT_REMOTE_ERROR;
    default: return ACL_ERROR_RT_INTERNAL_ERROR;
  }
}

// Runs `body` as a task of `stream`. A failure marks the communicator
// failed (peers stop waiting), is kept for HcclGetCommAsyncError and puts
// the stream in error with the message.
void enqueue(const CommPtr& comm, aclrtStream stream, std::function<void(Comm&)> body) {
  cdsim::enqueue(stream, [comm, body = std::move(body)] {
    try {
      body(*comm);
    } catch (const HcclError& e) {
      mark_failed(*comm, e.code, e.message);
      throw cdsim::SimError(stream_code(e.code), "simulated HCCL: " + e.message);
    } catch (const cdsim::SimError& e) {
      mark_failed(*comm, HCCL_E_RUNTIME, e.message);
      throw;
    }
  });
}

// ---- point-to-point ----

void run_transfers(Comm& comm, const std::vector<Transfer>& transfers, const char* call) {
  const int64_t deadline = exec_deadline(comm);
  Shared* shared = comm.shared;
  std::vector<Segment> outgoing;
  for (const Transfer& t : transfers) {
    if (!t.send) continue;
    Segment s = Segment::create(message_segment(comm, comm.rank, t.peer, t.sequence), t.bytes);
    if (t.bytes > 0) std::memcpy(s.data(), cdsim::host_pointer(t.buffer, t.bytes, "sendBuf"), t.bytes);
    outgoing.push_back(std::move(s));
    Lock lock(shared);
    shared->posted[comm.rank][t.peer] = t.sequence + 1;
    notify_all(shared);
  }
  for (const Transfer& t : transfers) {
    if (t.send) continue;
    {
      Lock lock(shared);
      wait_for(
          lock, comm, call, deadline, [&] { return shared->posted[t.peer][comm.rank] > t.sequence; },
          [&] { return format_message("rank %u sent nothing for receive #%llu", t.peer,
                                      static_cast<unsigned long long>(t.sequence)); });
    }
    const std::string what = format_message("%s: the message from rank %u", call, t.peer);
    Segment in = Segment::open(message_segment(comm, t.peer, comm.rank, t.sequence), t.bytes, what.c_str());
    if (t.bytes > 0) std::memcpy(cdsim::host_pointer(t.buffer, t.bytes, "recvBuf"), in.data(), t.bytes);
    Lock lock(shared);
    shared->consumed[t.peer][comm.rank] = t.sequence + 1;
    notify_all(shared);
  }
  size_t next = 0;
  for (const Transfer& t : transfers) {
    if (!t.send) continue;
    {
      Lock lock(shared);
      wait_for(
          lock, comm, call, deadline, [&] { return shared->consumed[comm.rank][t.peer] > t.sequence; },
          [&] { return format_message("rank %u did not receive send #%llu", t.peer,
                                      static_cast<unsigned long long>(t.sequence)); });
    }
    outgoing[next++].unlink();
  }
}

// ---- groups (per thread, nesting) ----

struct Pending {
  CommPtr comm;
  aclrtStream stream;
  std::function<void(Comm&)> collective;  // or a transfer:
  Transfer transfer;
  bool is_transfer;
};
thread_local int t_group_depth = 0;
thread_local std::vector<Pending> t_group;

// Launches (or, inside a group, records) a collective.
void launch(const CommPtr& comm, aclrtStream stream, std::function<void(Comm&)> body) {
  if (t_group_depth > 0) {
    t_group.push_back(Pending{comm, stream, std::move(body), Transfer{}, false});
    return;
  }
  enqueue(comm, stream, std::move(body));
}

void launch_transfer(const CommPtr& comm, aclrtStream stream, Transfer transfer, const char* call) {
  if (t_group_depth > 0) {
    t_group.push_back(Pending{comm, stream, nullptr, transfer, true});
    return;
  }
  enqueue(comm, stream, [transfer, call](Comm& c) { run_transfers(c, {transfer}, call); });
}

// One task per (communicator, stream) of the group: its collectives in
// call order, then its transfers as one batch.
void flush_group() {
  std::vector<Pending> group = std::move(t_group);
  t_group.clear();
  std::vector<bool> taken(group.size(), false);
  for (size_t i = 0; i < group.size(); ++i) {
    if (taken[i]) continue;
    std::vector<std::function<void(Comm&)>> collectives;
    std::vector<Transfer> transfers;
    for (size_t j = i; j < group.size(); ++j) {
      if (taken[j] || group[j].comm != group[i].comm || group[j].stream != group[i].stream) continue;
      taken[j] = true;
      if (group[j].is_transfer) {
        transfers.push_back(group[j].transfer);
      } else {
        collectives.push_back(std::move(group[j].collective));
      }
    }
    enqueue(group[i].comm, group[i].stream, [collectives = std::move(collectives), transfers](Comm& c) {
      for (const auto& body : collectives) body(c);
      if (!transfers.empty()) run_transfers(c, transfers, "HcclGroupEnd");
    });
  }
}

// Common prologue: the live communicator, checked stream.
CommPtr prepare(HcclComm handle, aclrtStream stream, const char* call) {
  CommPtr comm = live(handle, call);
  check_stream(*comm, stream, call);
  return comm;
}

}  // namespace
}  // namespace cdsim::hccl

using cdsim::hccl::Collective;
using cdsim::hccl::Comm;
using cdsim::hccl::CommPtr;
using cdsim::hccl::fail;
using cdsim::hccl::guarded;

extern "C" {

HcclResult HcclAllReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                         HcclComm comm, aclrtStream stream) {
  return guarded([&] {
    const char* call = "HcclAllReduce";
    CommPtr c = cdsim::hccl::prepare(comm, stream, call);
    const size_t size = cdsim::hccl::reduction_size(dataType, op, call);
    const uint64_t bytes = cdsim::hccl::checked_bytes(count, size, 1, call);
    cdsim::hccl::check_buffer(sendBuf, bytes, "sendBuf", call);
    cdsim::hccl::check_buffer(recvBuf, bytes, "recvBuf", call);
    if (count == 0) return;
    const uint64_t id = c->collectives++;
    cdsim::hccl::launch(c, stream, [=](Comm& self) {
      cdsim::hccl::run_collective(self, Collective{call, id, sendBuf, bytes, bytes, [&](Comm& cm, auto& input) {
        std::vector<const char*> inputs;
        for (uint32_t r = 0; r < cm.nranks; ++r) inputs.push_back(input(r));
        cdsim::hccl::reduce(cdsim::host_pointer(recvBuf, bytes, "recvBuf"), inputs, count, dataType, op);
      }});
    });
  });
}

HcclResult HcclReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                      uint32_t root, HcclComm comm, aclrtStream stream) {
  return guarded([&] {
    const char* call = "HcclReduce";
    CommPtr c = cdsim::hccl::prepare(comm, stream, call);
    cdsim::hccl::check_rank(*c, root, "root", call);
    const size_t size = cdsim::hccl::reduction_size(dataType, op, call);
    const uint64_t bytes = cdsim::hccl::checked_bytes(count, size, 1, call);
    cdsim::hccl::check_buffer(sendBuf, bytes, "sendBuf", call);
    if (c->rank == root) cdsim::hccl::check_buffer(recvBuf, bytes, "recvBuf", call);
    if (count == 0) return;
    const uint64_t id = c->collectives++;
    cdsim::hccl::launch(c, stream, [=](Comm& self) {
      cdsim::hccl::run_collective(self, Collective{call, id, sendBuf, bytes, bytes, [&](Comm& cm, auto& input) {
        if (cm.rank != root) return;
        std::vector<const char*> inputs;
        for (uint32_t r = 0; r < cm.nranks; ++r) inputs.push_back(input(r));
        cdsim::hccl::reduce(cdsim::host_pointer(recvBuf, bytes, "recvBuf"), inputs, count, dataType, op);
      }});
    });
  });
}

HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                         aclrtStream stream) {
  return guarded([&] {
    const char* call = "HcclBroadcast";
    CommPtr c = cdsim::hccl::prepare(comm, stream, call);
    cdsim::hccl::check_rank(*c, root, "root", call);
    const size_t size = cdsim::hccl::movement_size(dataType, call);
    const uint64_t bytes = cdsim::hccl::checked_bytes(count, size, 1, call);
    cdsim::hccl::check_buffer(buf, bytes, "buf", call);
    if (count == 0) return;
    const uint64_t id = c->collectives++;
    const bool is_root = c->rank == root;
    cdsim::hccl::launch(c, stream, [=](Comm& self) {
      // Only the root publishes; the others read its segment.
      cdsim::hccl::run_collective(
          self, Collective{call, id, is_root ? buf : nullptr, is_root ? bytes : 0, bytes, [&](Comm& cm, auto& input) {
            if (cm.rank != root) std::memcpy(cdsim::host_pointer(buf, bytes, "buf"), input(root), bytes);
          }});
    });
  });
}

HcclResult HcclAllGather(void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType, HcclComm comm,
                         aclrtStream stream) {
  return guarded([&] {
    const char* call = "HcclAllGather";
    CommPtr c = cdsim::hccl::prepare(comm, stream, call);
    const size_t size = cdsim::hccl::movement_size(dataType, call);
    const uint64_t bytes = cdsim::hccl::checked_bytes(sendCount, size, 1, call);
    const uint64_t total = cdsim::hccl::checked_bytes(sendCount, size, c->nranks, call);
    cdsim::hccl::check_buffer(sendBuf, bytes, "sendBuf", call);
    cdsim::hccl::check_buffer(recvBuf, total, "recvBuf", call);
    if (sendCount == 0) return;
    const uint64_t id = c->collectives++;
    cdsim::hccl::launch(c, stream, [=](Comm& self) {
      cdsim::hccl::run_collective(self, Collective{call, id, sendBuf, bytes, bytes, [&](Comm& cm, auto& input) {
        char* out = cdsim::host_pointer(recvBuf, total, "recvBuf");
        for (uint32_t r = 0; r < cm.nranks; ++r) std::memcpy(out + r * bytes, input(r), bytes);
      }});
    });
  });
}

HcclResult HcclReduceScatter(void* sendBuf, void* recvBuf, uint64_t recvCount, HcclDataType dataType,
                             HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  return guarded([&] {
    const char* call = "HcclReduceScatter";
    CommPtr c = cdsim::hccl::prepare(comm, stream, call);
    const size_t size = cdsim::hccl::reduction_size(dataType, op, call);
    const uint64_t bytes = cdsim::hccl::checked_bytes(recvCount, size, 1, call);
    const uint64_t total = cdsim::hccl::checked_bytes(recvCount, size, c->nranks, call);
    cdsim::hccl::check_buffer(sendBuf, total, "sendBuf", call);
    cdsim::hccl::check_buffer(recvBuf, bytes, "recvBuf", call);
    if (recvCount == 0) return;
    const uint64_t id = c->collectives++;
    cdsim::hccl::launch(c, stream, [=](Comm& self) {
      cdsim::hccl::run_collective(self, Collective{call, id, sendBuf, total, total, [&](Comm& cm, auto& input) {
        std::vector<const char*> inputs;
        for (uint32_t r = 0; r < cm.nranks; ++r) inputs.push_back(input(r) + cm.rank * bytes);
        cdsim::hccl::reduce(cdsim::host_pointer(recvBuf, bytes, "recvBuf"), inputs, recvCount, dataType, op);
      }});
    });
  });
}

HcclResult HcclSend(void* sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                    aclrtStream stream) {
  return guarded([&] {
    const char* call = "HcclSend";
    CommPtr c = cdsim::hccl::prepare(comm, stream, call);
    cdsim::hccl::check_rank(*c, destRank, "destRank", call);
    const uint64_t bytes = cdsim::hccl::checked_bytes(count, cdsim::hccl::movement_size(dataType, call), 1, call);
    cdsim::hccl::check_buffer(sendBuf, bytes, "sendBuf", call);
    if (count == 0) return;
    cdsim::hccl::launch_transfer(c, stream, {true, sendBuf, bytes, destRank, c->sent[destRank]++}, call);
  });
}

HcclResult HcclRecv(void* recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                    aclrtStream stream) {
  return guarded([&] {
    const char* call = "HcclRecv";
    CommPtr c = cdsim::hccl::prepare(comm, stream, call);
    cdsim::hccl::check_rank(*c, srcRank, "srcRank", call);
    const uint64_t bytes = cdsim::hccl::checked_bytes(count, cdsim::hccl::movement_size(dataType, call), 1, call);
    cdsim::hccl::check_buffer(recvBuf, bytes, "recvBuf", call);
    if (count == 0) return;
    cdsim::hccl::launch_transfer(c, stream, {false, recvBuf, bytes, srcRank, c->received[srcRank]++}, call);
  });
}

HcclResult HcclBatchSendRecv(HcclSendRecvItem* sendRecvInfo, uint32_t itemNum, HcclComm comm, aclrtStream stream) {
  return guarded([&] {
    const char* call = "HcclBatchSendRecv";
    CommPtr c = cdsim::hccl::prepare(comm, stream, call);
    if (itemNum > 0 && sendRecvInfo == nullptr) fail(HCCL_E_PTR, "%s: sendRecvInfo is NULL", call);
    std::vector<cdsim::hccl::Transfer> transfers;
    // Everything is checked before any sequence number is taken.
    for (uint32_t i = 0; i < itemNum; ++i) {
      const HcclSendRecvItem& item = sendRecvInfo[i];
      if (item.sendRecvType != HCCL_SEND && item.sendRecvType != HCCL_RECV) {
        fail(HCCL_E_PARA, "%s: item %u has sendRecvType %d", call, i, static_cast<int>(item.sendRecvType));
      }
      cdsim::hccl::check_rank(*c, item.remoteRank, "remoteRank", call);
      const uint64_t bytes =
          cdsim::hccl::checked_bytes(item.count, cdsim::hccl::movement_size(item.dataType, call), 1, call);
      cdsim::hccl::check_buffer(item.buf, bytes, "buf", call);
      if (bytes > 0) transfers.push_back({item.sendRecvType == HCCL_SEND, item.buf, bytes, item.remoteRank, 0});
    }
    for (cdsim::hccl::Transfer& t : transfers) {
      t.sequence = t.send ? c->sent[t.peer]++ : c->received[t.peer]++;
    }
    if (transfers.empty()) return;
    cdsim::hccl::enqueue(c, stream, [transfers, call](Comm& self) { cdsim::hccl::run_transfers(self, transfers, call); });
  });
}

HcclResult HcclGroupStart() {
  return guarded([] { ++cdsim::hccl::t_group_depth; });
}

HcclResult HcclGroupEnd() {
  return guarded([] {
    if (cdsim::hccl::t_group_depth == 0) fail(HCCL_E_PARA, "HcclGroupEnd: no group was started on this thread");
    if (--cdsim::hccl::t_group_depth == 0) cdsim::hccl::flush_group();
  });
}

}  // extern "C"
