/*
 * mutant_control.h: the control record of the mutation proxy (mutant_proxy.c).
 *
 * The harness (chipdock_conformance/mutation.py, through mutation_control.py)
 * writes this record into a 4096-byte file; the proxy maps the file
 * (MAP_SHARED) and reads the record at every call, so the harness switches
 * mutants inside one worker process by rewriting it. The layout is fixed,
 * little-endian, and the same as mutation_control.py's (the static asserts
 * below pin it; the Python side checks the same offsets).
 *
 * Writers set `operator` to 0 first, then the other fields, then `operator`
 * last, so a reader never sees a half-written record with a live operator.
 * `applied` and `pending` are written by the proxy only (atomic adds);
 * `release` by the harness only: other_stream holds its work until
 * `release` differs from its value when the kernel was enqueued (the
 * harness bumps it when a case is over, before it waits for `pending` 0).
 */
#ifndef CHIPDOCK_MUTANT_CONTROL_H_
#define CHIPDOCK_MUTANT_CONTROL_H_

#include <stddef.h>
#include <stdint.h>

#define CD_MUTANT_MAGIC 0x554D4443u /* "CDMU" read as little-endian bytes C D M U */
#define CD_MUTANT_LAYOUT_VERSION 1u
#define CD_MUTANT_FILE_SIZE 4096
#define CD_MUTANT_MAX_DTYPES 16
#define CD_MUTANT_OP_NAME_SIZE 64

/* Operators. 0 makes the proxy transparent. */
enum {
  CD_MUTANT_NONE = 0,
  /* kernel operators: apply to the one registered kernel (op, dtypes) named */
  CD_MUTANT_PERTURB_ULP = 1,
  CD_MUTANT_FLIP_ZERO_SIGN = 2,
  CD_MUTANT_DROP_NAN = 3,
  CD_MUTANT_IGNORE_BYTE_OFFSET = 4,
  CD_MUTANT_WRITE_INPUT = 5,
  CD_MUTANT_LATE_FINISH = 6,
  CD_MUTANT_OTHER_STREAM = 7,
  CD_MUTANT_SKIP_LAST = 8,
  /* runtime operators (op name "") */
  CD_MUTANT_TIMING_AT_RECORD = 20,
  CD_MUTANT_COPY_TRUNCATED = 21,
  CD_MUTANT_DESTROY_NO_WAIT = 22,
  CD_MUTANT_EVENT_EARLY = 23,
  CD_MUTANT_STREAM_QUERY_IDLE = 24,
  CD_MUTANT_WAIT_EVENT_IGNORED = 25,
  CD_MUTANT_CALLBACK_EARLY = 26,
  CD_MUTANT_DEVICE_SYNC_LAST_STREAM = 27,
  CD_MUTANT_MEMORY_INFO_TOTAL = 28,
  CD_MUTANT_ASYNC_COPY_NOW = 29
};

typedef struct cd_mutant_control {
  uint32_t magic;     /* CD_MUTANT_MAGIC */
  uint32_t version;   /* CD_MUTANT_LAYOUT_VERSION */
  int32_t op_code;    /* the operator (CD_MUTANT_*); 0 = none */
  int32_t k;          /* the operator's parameter: ulps, KiB, ... */
  int32_t num_dtypes; /* of the target signature; 0 = every signature of the op */
  int32_t dtypes[CD_MUTANT_MAX_DTYPES]; /* inputs then outputs, as in cd_kernel_def */
  char op[CD_MUTANT_OP_NAME_SIZE];      /* target op, NUL-terminated; "" for runtime operators */
  uint32_t padding;
  uint64_t applied; /* +1 each time the mutation really changed something */
  int64_t pending;  /* work the proxy started outside the caller's streams, not yet finished */
  uint64_t release; /* bumped by the harness when a case is over: other_stream's held work runs */
} cd_mutant_control;

/* C99 static assert (a negative array size fails to compile). */
#define CD_MUTANT_ASSERT_(cond, name) typedef char cd_mutant_assert_##name[(cond) ? 1 : -1]
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, magic) == 0, magic);
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, version) == 4, version);
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, op_code) == 8, op_code);
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, k) == 12, k);
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, num_dtypes) == 16, num_dtypes);
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, dtypes) == 20, dtypes);
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, op) == 84, op);
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, padding) == 148, padding);
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, applied) == 152, applied);
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, pending) == 160, pending);
CD_MUTANT_ASSERT_(offsetof(cd_mutant_control, release) == 168, release);
CD_MUTANT_ASSERT_(sizeof(cd_mutant_control) == 176, size);
CD_MUTANT_ASSERT_(sizeof(cd_mutant_control) <= CD_MUTANT_FILE_SIZE, fits_the_file);

#endif /* CHIPDOCK_MUTANT_CONTROL_H_ */
