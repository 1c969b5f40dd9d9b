/*
 * ABI driver for the chipdock CPU backend, in plain C99: it is what a core
 * written in C would do, and it proves the header works from C.
 *
 *   abi_driver <libchipdock_cpu.so> suite   every check below
 *   abi_driver <lib> oom                    run with CHIPDOCK_CPU_MEMORY_LIMIT=1M
 *   abi_driver <lib> deref                  reads a device pointer on the host
 *   abi_driver <lib> badenv                 run with an invalid environment
 *
 * It loads the library with dlopen, calls the entry with a fake core (whose
 * kernel_register records the definitions), and goes through the table.
 * Prints "PASS <name>" or "FAIL <name>: <why>" per check and exits 1 if any
 * check failed. Expectations come from the same environment variables the
 * plugin reads (CHIPDOCK_CPU_DEVICES, _STRICT, _MEMORY_LIMIT).
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "chipdock/device_api.h"

/* ------------------------------------------------------------------------ */
/* Reporting                                                                  */
/* ------------------------------------------------------------------------ */

static const cd_plugin_api* api;
static const char* g_check = "?";
static int g_failures;
static int g_strict;
static int32_t g_devices = 1;

static void begin(const char* name) { g_check = name; }

static void pass(void) {
  printf("PASS %s\n", g_check);
  fflush(stdout);
}

static void fail_check(const char* fmt, ...) {
  va_list args;
  printf("FAIL %s: ", g_check);
  va_start(args, fmt);
  vprintf(fmt, args);
  va_end(args);
  printf("\n");
  fflush(stdout);
  ++g_failures;
}

/* Inside a check function (returning void): stop it with a FAIL line. */
#define REQUIRE(cond, ...)          \
  do {                              \
    if (!(cond)) {                  \
      fail_check(__VA_ARGS__);      \
      return;                       \
    }                               \
  } while (0)

/* The call must succeed. */
#define CALL_OK(expr)                                                           \
  do {                                                                          \
    cd_error* e_ = (expr);                                                      \
    if (e_ != NULL) {                                                           \
      fail_check("%s failed: [%d] %s", #expr, (int)api->error_get_code(e_),    \
                 api->error_get_message(e_));                                   \
      api->error_destroy(e_);                                                   \
      return;                                                                   \
    }                                                                           \
  } while (0)

/* The call must fail with `code` and a message containing `text`. */
#define CALL_ERR(expr, code, text)                                              \
  do {                                                                          \
    if (!expect_error((expr), (code), (text), #expr)) return;                   \
  } while (0)

static int expect_error(cd_error* e, cd_status_t code, const char* text, const char* expr) {
  int good;
  if (e == NULL) {
    fail_check("%s succeeded, expected status %d", expr, (int)code);
    return 0;
  }
  good = api->error_get_code(e) == code &&
         (text == NULL || strstr(api->error_get_message(e), text) != NULL);
  if (!good) {
    fail_check("%s gave [%d] '%s', expected status %d with '%s'", expr,
               (int)api->error_get_code(e), api->error_get_message(e), (int)code,
               text ? text : "");
  }
  api->error_destroy(e);
  return good;
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                              */
/* ------------------------------------------------------------------------ */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void sleep_ms(long ms) {
  struct timespec t;
  t.tv_sec = ms / 1000;
  t.tv_nsec = (ms % 1000) * 1000000L;
  while (nanosleep(&t, &t) != 0) {
  }
}

static int is_tagged(const void* p) {
  return ((uintptr_t)p & (uintptr_t)UINT64_C(0x00FF000000000000)) != 0;
}

static void fill_pattern(unsigned char* p, size_t n, unsigned seed) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 9)) & 0xffu);
}

/* Host callbacks used by several checks. */
static pthread_t g_main_thread;
static volatile int g_flag;
static volatile int g_seen;
static volatile int g_on_main_thread;

static void cb_sleep_then_flag(void* ms) {
  sleep_ms((long)(intptr_t)ms);
  g_flag = 1;
}

static void cb_sleep(void* ms) { sleep_ms((long)(intptr_t)ms); }

static void cb_see_flag(void* unused) {
  (void)unused;
  g_seen = g_flag;
  g_on_main_thread = pthread_equal(pthread_self(), g_main_thread);
}

static void cb_increment(void* counter) { ++*(volatile int*)counter; }

/* ------------------------------------------------------------------------ */
/* The fake core                                                              */
/* ------------------------------------------------------------------------ */

typedef struct recorded_def {
  char op[32];
  cd_dtype_t dtypes[16];
  int32_t num_dtypes;
  cd_kernel_fn fn;
} recorded_def;

#define MAX_DEFS 4096 /* every kernel of the backend, all families */
static recorded_def g_defs[MAX_DEFS];
static int g_num_defs;
static int g_log_lines;
static char g_fake_registry_storage;
#define FAKE_REGISTRY ((cd_kernel_registry*)&g_fake_registry_storage)

static cd_status_t fake_kernel_register(cd_kernel_registry* registry, const cd_kernel_def* def) {
  recorded_def* r;
  if (registry != FAKE_REGISTRY || def == NULL || def->op == NULL || def->fn == NULL ||
      def->num_dtypes < 0 || def->num_dtypes > 8 || g_num_defs == MAX_DEFS) {
    return CD_STATUS_INVALID_ARGUMENT;
  }
  r = &g_defs[g_num_defs++];
  snprintf(r->op, sizeof r->op, "%s", def->op); /* the core copies what it needs */
  memcpy(r->dtypes, def->dtypes, (size_t)def->num_dtypes * sizeof(cd_dtype_t));
  r->num_dtypes = def->num_dtypes;
  r->fn = def->fn;
  return CD_STATUS_OK;
}

static cd_status_t fake_workspace_allocate(const cd_kernel_context* ctx, size_t bytes,
                                           void** out) {
  (void)ctx;
  *out = bytes ? malloc(bytes) : NULL;
  return (bytes && *out == NULL) ? CD_STATUS_OUT_OF_MEMORY : CD_STATUS_OK;
}

static void fake_log(cd_log_level_t level, const char* message) {
  fprintf(stderr, "[core log %d] %s\n", (int)level, message);
  ++g_log_lines;
}

static cd_core_api make_core(int32_t major) {
  cd_core_api core;
  memset(&core, 0, sizeof core);
  core.struct_size = sizeof core;
  core.abi_major = major;
  core.abi_minor = CD_ABI_VERSION_MINOR;
  core.core_version = "test-driver";
  core.kernel_register = fake_kernel_register;
  core.workspace_allocate = fake_workspace_allocate;
  core.log = fake_log;
  return core;
}

static cd_core_api g_core;

static cd_kernel_fn find_kernel(const char* op, cd_dtype_t dtype) {
  int i;
  for (i = 0; i < g_num_defs; ++i) {
    if (strcmp(g_defs[i].op, op) == 0 && g_defs[i].dtypes[0] == dtype) return g_defs[i].fn;
  }
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                    */
/* ------------------------------------------------------------------------ */

static cd_plugin_entry_fn load_entry(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  void* sym;
  cd_plugin_entry_fn entry;
  if (lib == NULL) {
    fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    exit(2);
  }
  sym = dlsym(lib, CD_PLUGIN_ENTRY_SYMBOL);
  if (sym == NULL) {
    fprintf(stderr, "dlsym(%s): %s\n", CD_PLUGIN_ENTRY_SYMBOL, dlerror());
    exit(2);
  }
  /* ISO C has no object-to-function pointer cast; POSIX guarantees the sizes match. */
  memcpy(&entry, &sym, sizeof entry);
  return entry;
}

static void check_entry(cd_plugin_entry_fn entry) {
  cd_core_api other = make_core(CD_ABI_VERSION_MAJOR + 1);
  cd_core_api tiny = make_core(CD_ABI_VERSION_MAJOR);
  tiny.struct_size = sizeof(size_t);
  begin("entry_refuses_bad_core");
  REQUIRE(entry(NULL) == NULL, "entry(NULL) returned a table");
  REQUIRE(entry(&other) == NULL, "entry accepted ABI major %d", (int)other.abi_major);
  REQUIRE(entry(&tiny) == NULL, "entry accepted a core table of %zu bytes", tiny.struct_size);
  pass();
}

static void check_table(void) {
  begin("entry_table");
  REQUIRE(api != NULL, "entry returned NULL for a matching core");
  REQUIRE(api->struct_size == sizeof(cd_plugin_api), "struct_size %zu", api->struct_size);
  REQUIRE(api->struct_size >= CD_PLUGIN_API_SIZE_V1_0, "table smaller than v1.0");
  REQUIRE(api->abi_major == CD_ABI_VERSION_MAJOR && api->abi_minor == CD_ABI_VERSION_MINOR,
          "abi %d.%d", (int)api->abi_major, (int)api->abi_minor);
  REQUIRE(strcmp(api->name, "cpu") == 0 && strcmp(api->device_type, "cpu") == 0,
          "name '%s' device_type '%s'", api->name, api->device_type);
  REQUIRE(api->version != NULL && api->version[0] != '\0', "empty version");
  printf("INFO version %s\n", api->version);
  REQUIRE(api->plugin_shutdown && api->device_get_current && api->device_set_current &&
              api->device_synchronize && api->host_memory_allocate && api->host_memory_free &&
              api->memory_get_info && api->memory_set && api->memory_set_async &&
              api->memcpy_host_to_device_async && api->memcpy_device_to_host_async &&
              api->memcpy_device_to_device_async && api->stream_query &&
              api->stream_wait_event && api->stream_add_host_callback &&
              api->event_elapsed_time && api->kernels_register,
          "an optional non-collective slot is NULL");
  REQUIRE(api->comm_init_rank == NULL && api->comm_all_reduce == NULL,
          "collective slots should be NULL");
  pass();
}

static void check_kernels_registered(void) {
  int dt, i, found;
  begin("kernels_register_copy_all_dtypes");
  CALL_ERR(api->kernels_register(NULL), CD_STATUS_INVALID_ARGUMENT, "kernels_register");
  CALL_OK(api->kernels_register(FAKE_REGISTRY));
  for (dt = CD_DTYPE_FLOAT32; dt <= CD_DTYPE_BOOL; ++dt) {
    found = 0;
    for (i = 0; i < g_num_defs; ++i) {
      if (strcmp(g_defs[i].op, "copy") == 0 && g_defs[i].num_dtypes == 2 &&
          g_defs[i].dtypes[0] == dt && g_defs[i].dtypes[1] == dt) {
        ++found;
      }
    }
    REQUIRE(found == 1, "copy for dtype %d registered %d times", dt, found);
  }
  for (i = 0; i < g_num_defs; ++i) { /* no (op, signature) twice: a later one would replace it */
    for (dt = 0; dt < i; ++dt) {
      REQUIRE(strcmp(g_defs[i].op, g_defs[dt].op) != 0 || g_defs[i].num_dtypes != g_defs[dt].num_dtypes ||
                  memcmp(g_defs[i].dtypes, g_defs[dt].dtypes,
                         (size_t)g_defs[i].num_dtypes * sizeof(cd_dtype_t)) != 0,
              "'%s' registered twice for one signature", g_defs[i].op);
    }
  }
  pass();
}

/* ------------------------------------------------------------------------ */
/* Devices                                                                    */
/* ------------------------------------------------------------------------ */

static void check_device_count(void) {
  int32_t count = -1;
  begin("device_count");
  CALL_OK(api->device_get_count(&count));
  REQUIRE(count == g_devices, "count %d, expected %d", (int)count, (int)g_devices);
  CALL_ERR(api->device_get_count(NULL), CD_STATUS_INVALID_ARGUMENT, "device_get_count");
  pass();
}

static void check_properties(void) {
  cd_device_properties p;
  uint64_t mask = 0;
  int dt;
  const char* limit = getenv("CHIPDOCK_CPU_MEMORY_LIMIT");
  begin("device_properties");
  memset(&p, 0x7f, sizeof p);
  p.struct_size = sizeof p;
  p.next = NULL;
  CALL_OK(api->device_get_properties(g_devices - 1, &p));
  printf("INFO name '%s' arch '%s' runtime '%s' units %d memory %llu\n", p.name,
         p.architecture, p.runtime_version, (int)p.compute_units,
         (unsigned long long)p.total_memory);
  for (dt = CD_DTYPE_FLOAT32; dt <= CD_DTYPE_BOOL; ++dt) mask |= CD_DTYPE_BIT(dt);
  REQUIRE(strncmp(p.name, "chipdock CPU (", 14) == 0, "name '%s'", p.name);
  REQUIRE(strcmp(p.vendor, "chipdock") == 0, "vendor '%s'", p.vendor);
  REQUIRE(p.architecture[0] != '\0' && p.driver_version[0] == '\0', "architecture/driver");
  REQUIRE(p.runtime_version[0] != '\0', "empty runtime_version");
  REQUIRE(p.total_memory > 0, "total_memory 0");
  REQUIRE(limit != NULL || p.total_memory >= (uint64_t)64 << 20, "total_memory too small");
  REQUIRE(p.supported_dtypes == mask, "dtype mask 0x%llx", (unsigned long long)p.supported_dtypes);
  REQUIRE(p.compute_units >= 1, "compute_units %d", (int)p.compute_units);
  REQUIRE(p.dlpack_device_type == (g_strict ? CD_DLPACK_EXT_DEV : CD_DLPACK_CPU),
          "dlpack_device_type %d", (int)p.dlpack_device_type);
  REQUIRE(p.host_addressable == (g_strict ? 0 : 1), "host_addressable %d",
          (int)p.host_addressable);
  REQUIRE(p.reserved == 0, "reserved %d", (int)p.reserved);
  CALL_ERR(api->device_get_properties(-1, &p), CD_STATUS_INVALID_ARGUMENT, "device -1");
  CALL_ERR(api->device_get_properties(g_devices, &p), CD_STATUS_INVALID_ARGUMENT,
           "device_get_properties");
  CALL_ERR(api->device_get_properties(0, NULL), CD_STATUS_INVALID_ARGUMENT, "props is NULL");
  pass();
}

/* An older caller's smaller struct: nothing beyond its size is written. */
static void check_properties_small_struct(void) {
  cd_device_properties p;
  size_t i, size = CD_STRUCT_SIZE(cd_device_properties, vendor);
  const unsigned char* bytes = (const unsigned char*)&p;
  begin("device_properties_respects_struct_size");
  memset(&p, 0xAB, sizeof p);
  p.struct_size = size;
  p.next = NULL;
  CALL_OK(api->device_get_properties(0, &p));
  REQUIRE(strcmp(p.vendor, "chipdock") == 0, "vendor not written");
  for (i = size; i < sizeof p; ++i) {
    REQUIRE(bytes[i] == 0xAB, "byte %zu beyond struct_size %zu was written", i, size);
  }
  pass();
}

static void* thread_get_current(void* out) {
  cd_error* e = api->device_get_current((int32_t*)out);
  if (e != NULL) {
    *(int32_t*)out = -99;
    api->error_destroy(e);
  }
  return NULL;
}

static void check_current_device(void) {
  int32_t d = -1, other = -1;
  pthread_t t;
  begin("device_current_is_per_thread");
  CALL_OK(api->device_get_current(&d));
  REQUIRE(d == 0, "initial current device %d", (int)d);
  CALL_OK(api->device_set_current(g_devices - 1));
  CALL_OK(api->device_get_current(&d));
  REQUIRE(d == g_devices - 1, "current %d after set(%d)", (int)d, (int)(g_devices - 1));
  REQUIRE(pthread_create(&t, NULL, thread_get_current, &other) == 0, "pthread_create");
  pthread_join(t, NULL);
  REQUIRE(other == 0, "another thread sees current device %d", (int)other);
  CALL_ERR(api->device_set_current(g_devices), CD_STATUS_INVALID_ARGUMENT,
           "device_set_current");
  CALL_ERR(api->device_get_current(NULL), CD_STATUS_INVALID_ARGUMENT, "device_get_current");
  CALL_OK(api->device_set_current(0));
  pass();
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                     */
/* ------------------------------------------------------------------------ */

static void check_alloc_free(void) {
  void* p = (void*)1;
  void* q = NULL;
  int local = 0;
  begin("memory_allocate_free");
  CALL_OK(api->memory_allocate(0, 0, &p));
  REQUIRE(p == NULL, "0 bytes gave %p", p);
  CALL_OK(api->memory_allocate(0, 1000, &p));
  REQUIRE(p != NULL, "NULL for 1000 bytes");
  REQUIRE(((uintptr_t)p & 255u) == 0, "%p is not 256-byte aligned", p);
  REQUIRE(is_tagged(p) == g_strict, "pointer %p, strict=%d", p, g_strict);
  CALL_ERR(api->memory_free(0, (char*)p + 8), CD_STATUS_INVALID_ARGUMENT, "not to its start");
  CALL_ERR(api->memory_free(0, &local), CD_STATUS_INVALID_ARGUMENT, "memory_free");
  if (g_devices > 1) {
    CALL_ERR(api->memory_free(1, p), CD_STATUS_INVALID_ARGUMENT, "cpu:0");
  }
  CALL_OK(api->memory_free(0, p));
  CALL_ERR(api->memory_free(0, p), CD_STATUS_INVALID_ARGUMENT, "already freed");
  CALL_OK(api->memory_free(0, NULL));
  CALL_ERR(api->memory_allocate(g_devices, 16, &q), CD_STATUS_INVALID_ARGUMENT,
           "memory_allocate");
  REQUIRE(q == NULL, "out-pointer written on failure");
  CALL_ERR(api->memory_allocate(0, 16, NULL), CD_STATUS_INVALID_ARGUMENT, "ptr is NULL");
  pass();
}

static void check_memory_info(void) {
  size_t free0 = 0, total0 = 0, free1 = 0, total1 = 0;
  void* p = NULL;
  begin("memory_get_info_accounting");
  CALL_OK(api->memory_get_info(0, &free0, &total0));
  REQUIRE(free0 <= total0 && total0 > 0, "free %zu total %zu", free0, total0);
  CALL_OK(api->memory_allocate(0, (size_t)1 << 20, &p));
  CALL_OK(api->memory_get_info(0, &free1, &total1));
  REQUIRE(total1 == total0 && free0 - free1 == (size_t)1 << 20, "free %zu -> %zu", free0,
          free1);
  CALL_OK(api->memory_free(0, p));
  CALL_OK(api->memory_get_info(0, &free1, &total1));
  REQUIRE(free1 == free0, "free %zu after freeing, was %zu", free1, free0);
  CALL_ERR(api->memory_get_info(0, NULL, &total1), CD_STATUS_INVALID_ARGUMENT, "free_bytes");
  pass();
}

static void check_sync_copies(int32_t dev) {
  unsigned char src[1000], out[1000], probe[64];
  char *a = NULL, *b = NULL;
  size_t i;
  begin(dev == 0 ? "sync_copies_roundtrip_cpu0" : "sync_copies_roundtrip_cpu1");
  fill_pattern(src, sizeof src, 1);
  memset(out, 0, sizeof out);
  CALL_OK(api->memory_allocate(dev, 4096, (void**)&a));
  CALL_OK(api->memory_allocate(dev, 4096, (void**)&b));
  CALL_OK(api->memcpy_host_to_device(dev, a + 100, src, sizeof src));
  CALL_OK(api->memcpy_device_to_device(dev, b + 2000, a + 100, sizeof src));
  CALL_OK(api->memcpy_device_to_host(dev, out, b + 2000, sizeof out));
  REQUIRE(memcmp(src, out, sizeof src) == 0, "round trip h2d/d2d/d2h differs");
  /* memset writes the low byte only, and only the range given */
  CALL_OK(api->memory_set(dev, a + 110, 0x1AB, 50));
  CALL_OK(api->memcpy_device_to_host(dev, probe, a + 109, 52));
  REQUIRE(probe[0] == src[9] && probe[51] == src[60], "memset wrote outside its range");
  for (i = 1; i <= 50; ++i) REQUIRE(probe[i] == 0xAB, "byte %zu is 0x%x", i, probe[i]);
  /* zero-byte copies are no-ops, whatever the pointers */
  CALL_OK(api->memcpy_host_to_device(dev, NULL, NULL, 0));
  CALL_OK(api->memcpy_device_to_device(dev, b, a, 0));
  CALL_OK(api->memory_free(dev, a));
  CALL_OK(api->memory_free(dev, b));
  pass();
}

static void check_copy_errors(void) {
  unsigned char host[8192];
  char *a = NULL, *b = NULL;
  cd_error* e;
  begin("sync_copy_errors");
  memset(host, 0, sizeof host);
  CALL_OK(api->memory_allocate(0, 4096, (void**)&a));
  CALL_OK(api->memory_allocate(0, 4096, (void**)&b));
  CALL_ERR(api->memcpy_host_to_device(0, a + 4000, host, 200), CD_STATUS_OUT_OF_RANGE,
           "memcpy_host_to_device: dst range [alloc+4000, +200) overruns the 4096-byte");
  CALL_ERR(api->memcpy_host_to_device(0, a, host, 8192), CD_STATUS_OUT_OF_RANGE, "overruns");
  CALL_ERR(api->memcpy_device_to_host(0, host, b + 1, 4096), CD_STATUS_OUT_OF_RANGE,
           "memcpy_device_to_host: src range");
  CALL_ERR(api->memcpy_device_to_device(0, a, b + 100, 4000), CD_STATUS_OUT_OF_RANGE,
           "memcpy_device_to_device");
  CALL_ERR(api->memcpy_device_to_device(0, a + 10, a, 100), CD_STATUS_INVALID_ARGUMENT,
           "overlap");
  CALL_ERR(api->memory_set(0, b + 4095, 0, 2), CD_STATUS_OUT_OF_RANGE, "memory_set");
  CALL_ERR(api->memcpy_host_to_device(0, host, host, 16), CD_STATUS_INVALID_ARGUMENT,
           "not inside any allocation");
  CALL_ERR(api->memcpy_host_to_device(0, a, NULL, 16), CD_STATUS_INVALID_ARGUMENT,
           "src is NULL");
  CALL_ERR(api->memcpy_device_to_host(0, NULL, a, 16), CD_STATUS_INVALID_ARGUMENT,
           "dst is NULL");
  CALL_ERR(api->memcpy_host_to_device(g_devices, a, host, 16), CD_STATUS_INVALID_ARGUMENT,
           "device");
  /* one past the end is not inside the allocation (unless the allocator put
   * b right there, which some do) */
  if (a + 4096 != b) {
    e = api->memcpy_device_to_host(0, host, a + 4096, 1);
    REQUIRE(e != NULL, "reading one byte past the end succeeded");
    REQUIRE(api->error_get_code(e) == CD_STATUS_INVALID_ARGUMENT ||
                api->error_get_code(e) == CD_STATUS_OUT_OF_RANGE,
            "past-the-end code %d", (int)api->error_get_code(e));
    api->error_destroy(e);
  }
  if (g_devices > 1) {
    CALL_ERR(api->memcpy_host_to_device(1, a, host, 16), CD_STATUS_INVALID_ARGUMENT,
             "allocation of cpu:0, not cpu:1");
  }
  if (g_strict) { /* a device pointer where a host pointer belongs */
    CALL_ERR(api->memcpy_device_to_host(0, b, a, 16), CD_STATUS_INVALID_ARGUMENT,
             "is a device pointer");
  }
  CALL_OK(api->memory_free(0, a));
  CALL_OK(api->memory_free(0, b));
  pass();
}

static void check_pinned(void) {
  unsigned char* p = NULL;
  void* z = (void*)1;
  int local = 0;
  long page = sysconf(_SC_PAGE_SIZE);
  begin("host_memory_pinned");
  CALL_OK(api->host_memory_allocate(10000, (void**)&p));
  REQUIRE(p != NULL && ((uintptr_t)p % (uintptr_t)page) == 0, "%p is not page aligned",
          (void*)p);
  REQUIRE(!is_tagged(p), "pinned memory must be host-addressable");
  memset(p, 0x3C, 10000); /* writable on the host, also in strict mode */
  REQUIRE(p[9999] == 0x3C, "pinned memory not writable");
  CALL_ERR(api->host_memory_free(p + 1), CD_STATUS_INVALID_ARGUMENT, "host_memory_free");
  CALL_ERR(api->host_memory_free(&local), CD_STATUS_INVALID_ARGUMENT, "not pinned memory");
  CALL_OK(api->host_memory_free(p));
  CALL_ERR(api->host_memory_free(p), CD_STATUS_INVALID_ARGUMENT, "host_memory_free");
  CALL_OK(api->host_memory_free(NULL));
  CALL_OK(api->host_memory_allocate(0, &z));
  REQUIRE(z == NULL, "0 bytes gave %p", z);
  pass();
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct big_check {
  const unsigned char* expect;
  const unsigned char* got;
  size_t bytes;
  int ok;
  int on_main;
} big_check;

static void cb_compare(void* arg) {
  big_check* c = (big_check*)arg;
  c->ok = memcmp(c->expect, c->got, c->bytes) == 0;
  c->on_main = pthread_equal(pthread_self(), g_main_thread);
}

/* h2d -> d2d -> memset of the source -> d2h, then a callback that checks
 * the data: every step must see the previous one's result. */
static void check_async_ordered(void) {
  const size_t n = (size_t)64 << 20;
  unsigned char *src = NULL, *dst;
  char *x = NULL, *y = NULL;
  cd_stream* s = NULL;
  int32_t done = -1;
  big_check c;
  begin("async_copies_ordered_64MiB");
  CALL_OK(api->host_memory_allocate(n, (void**)&src));
  dst = (unsigned char*)malloc(n);
  REQUIRE(dst != NULL, "malloc");
  fill_pattern(src, n, 3);
  memset(dst, 0, n);
  CALL_OK(api->memory_allocate(0, n, (void**)&x));
  CALL_OK(api->memory_allocate(0, n, (void**)&y));
  CALL_OK(api->stream_create(0, CD_STREAM_FLAGS_DEFAULT, &s));
  c.expect = src;
  c.got = dst;
  c.bytes = n;
  c.ok = -1;
  c.on_main = -1;
  CALL_OK(api->memcpy_host_to_device_async(0, x, src, n, s));
  CALL_OK(api->memcpy_device_to_device_async(0, y, x, n, s));
  CALL_OK(api->memory_set_async(0, x, 0, n, s));
  CALL_OK(api->memcpy_device_to_host_async(0, dst, y, n, s));
  CALL_OK(api->stream_add_host_callback(s, cb_compare, &c));
  CALL_OK(api->stream_synchronize(s));
  REQUIRE(c.ok == 1, "the callback saw wrong data (ok=%d)", c.ok);
  REQUIRE(c.on_main == 0, "the host callback ran on the caller's thread");
  CALL_OK(api->stream_query(s, &done));
  REQUIRE(done == 1, "stream_query %d after synchronize", (int)done);
  CALL_OK(api->memcpy_device_to_host(0, dst, x, 4096));
  REQUIRE(dst[0] == 0 && dst[4095] == 0, "memset_async did not run");
  CALL_OK(api->stream_destroy(s));
  CALL_OK(api->memory_free(0, x));
  CALL_OK(api->memory_free(0, y));
  CALL_OK(api->host_memory_free(src));
  free(dst);
  pass();
}

static void check_async_really_async(void) {
  cd_stream* s = NULL;
  int32_t done = -1;
  double t0, took;
  begin("stream_work_runs_off_the_caller_thread");
  CALL_OK(api->stream_create(0, 0, &s));
  g_flag = 0;
  t0 = now_ms();
  CALL_OK(api->stream_add_host_callback(s, cb_sleep_then_flag, (void*)(intptr_t)150));
  took = now_ms() - t0;
  CALL_OK(api->stream_query(s, &done));
  REQUIRE(done == 0, "stream_query says complete right after a 150 ms callback was enqueued");
  REQUIRE(took < 100.0, "enqueue took %.1f ms (it waited for the work)", took);
  CALL_OK(api->stream_synchronize(s));
  REQUIRE(g_flag == 1, "synchronize returned before the callback ran");
  CALL_OK(api->stream_query(s, &done));
  REQUIRE(done == 1, "query %d after synchronize", (int)done);
  CALL_ERR(api->stream_query(s, NULL), CD_STATUS_INVALID_ARGUMENT, "is_complete");
  CALL_ERR(api->stream_add_host_callback(s, NULL, NULL), CD_STATUS_INVALID_ARGUMENT,
           "fn is NULL");
  CALL_ERR(api->stream_create(0, 1u, &s), CD_STATUS_INVALID_ARGUMENT, "flags");
  CALL_ERR(api->stream_create(g_devices, 0, &s), CD_STATUS_INVALID_ARGUMENT, "stream_create");
  CALL_OK(api->stream_destroy(s));
  pass();
}

static void check_callbacks_in_order(void) {
  cd_stream* s = NULL;
  volatile int counter = 0;
  int i;
  begin("host_callbacks_run_in_order");
  CALL_OK(api->stream_create(0, 0, &s));
  g_flag = 0;
  g_seen = -1;
  CALL_OK(api->stream_add_host_callback(s, cb_sleep_then_flag, (void*)(intptr_t)50));
  CALL_OK(api->stream_add_host_callback(s, cb_see_flag, NULL));
  for (i = 0; i < 1000; ++i) {
    CALL_OK(api->stream_add_host_callback(s, cb_increment, (void*)&counter));
  }
  CALL_OK(api->stream_synchronize(s));
  REQUIRE(g_seen == 1, "a later callback ran before an earlier one finished");
  REQUIRE(counter == 1000, "%d of 1000 callbacks ran", counter);
  REQUIRE(g_on_main_thread == 0, "callback ran on the main thread");
  CALL_OK(api->stream_destroy(s));
  pass();
}

typedef struct self_sync {
  cd_stream* stream;
  cd_status_t code;
} self_sync;

static void cb_sync_own_stream(void* arg) {
  self_sync* ss = (self_sync*)arg;
  cd_error* e = api->stream_synchronize(ss->stream);
  ss->code = e ? api->error_get_code(e) : CD_STATUS_OK;
  if (e) api->error_destroy(e);
}

/* The ABI forbids it; the plugin must answer with an error, not deadlock. */
static void check_callback_self_sync_refused(void) {
  self_sync ss;
  begin("host_callback_self_synchronize_refused");
  CALL_OK(api->stream_create(0, 0, &ss.stream));
  ss.code = -1;
  CALL_OK(api->stream_add_host_callback(ss.stream, cb_sync_own_stream, &ss));
  CALL_OK(api->stream_synchronize(ss.stream));
  REQUIRE(ss.code == CD_STATUS_INVALID_ARGUMENT, "code %d", (int)ss.code);
  CALL_OK(api->stream_destroy(ss.stream));
  pass();
}

/* Freeing memory that enqueued work still uses is a caller bug: reported
 * asynchronously, once, by the next synchronization. */
static void check_async_error(void) {
  cd_stream* s = NULL;
  char *a = NULL, *b = NULL;
  begin("async_error_reported_once");
  CALL_OK(api->stream_create(0, 0, &s));
  CALL_OK(api->memory_allocate(0, 4096, (void**)&a));
  CALL_OK(api->memory_allocate(0, 4096, (void**)&b));
  CALL_OK(api->stream_add_host_callback(s, cb_sleep, (void*)(intptr_t)50));
  CALL_OK(api->memcpy_device_to_device_async(0, b, a, 4096, s));
  CALL_OK(api->memory_free(0, a)); /* the copy has not run yet */
  CALL_ERR(api->stream_synchronize(s), CD_STATUS_INVALID_ARGUMENT,
           "memcpy_device_to_device_async (asynchronous): src: the allocation");
  CALL_OK(api->stream_synchronize(s));
  /* the same through device_synchronize */
  CALL_OK(api->memory_allocate(0, 4096, (void**)&a));
  CALL_OK(api->stream_add_host_callback(s, cb_sleep, (void*)(intptr_t)50));
  CALL_OK(api->memory_set_async(0, a, 1, 4096, s));
  CALL_OK(api->memory_free(0, a));
  CALL_ERR(api->device_synchronize(0), CD_STATUS_INVALID_ARGUMENT, "freed while work");
  CALL_OK(api->device_synchronize(0));
  CALL_OK(api->stream_synchronize(s));
  CALL_OK(api->stream_destroy(s));
  CALL_OK(api->memory_free(0, b));
  pass();
}

static void check_device_synchronize(void) {
  cd_stream *s1 = NULL, *s2 = NULL;
  volatile int c1 = 0, c2 = 0;
  begin("device_synchronize_waits_for_all_streams");
  CALL_OK(api->stream_create(0, 0, &s1));
  CALL_OK(api->stream_create(0, 0, &s2));
  CALL_OK(api->stream_add_host_callback(s1, cb_sleep, (void*)(intptr_t)60));
  CALL_OK(api->stream_add_host_callback(s1, cb_increment, (void*)&c1));
  CALL_OK(api->stream_add_host_callback(s2, cb_sleep, (void*)(intptr_t)80));
  CALL_OK(api->stream_add_host_callback(s2, cb_increment, (void*)&c2));
  CALL_OK(api->device_synchronize(0));
  REQUIRE(c1 == 1 && c2 == 1, "device_synchronize returned early (%d, %d)", c1, c2);
  CALL_ERR(api->device_synchronize(g_devices), CD_STATUS_INVALID_ARGUMENT,
           "device_synchronize");
  CALL_OK(api->stream_destroy(s1));
  CALL_OK(api->stream_destroy(s2));
  pass();
}

static void check_destroy_drains(void) {
  cd_stream* s = NULL;
  begin("stream_destroy_drains");
  CALL_OK(api->stream_create(0, 0, &s));
  g_flag = 0;
  CALL_OK(api->stream_add_host_callback(s, cb_sleep_then_flag, (void*)(intptr_t)60));
  CALL_OK(api->stream_destroy(s));
  REQUIRE(g_flag == 1, "stream_destroy returned before its work completed");
  pass();
}

/* ------------------------------------------------------------------------ */
/* Events                                                                     */
/* ------------------------------------------------------------------------ */

/* A: slow callback, memset; record e. B: wait e, copy out, check. */
static void check_two_streams_joined(void) {
  cd_stream *a = NULL, *b = NULL;
  cd_event* e = NULL;
  char* buf = NULL;
  unsigned char host[256];
  int32_t done = -1;
  size_t i;
  begin("streams_joined_by_event");
  CALL_OK(api->stream_create(0, 0, &a));
  CALL_OK(api->stream_create(0, 0, &b));
  CALL_OK(api->event_create(0, CD_EVENT_FLAGS_DEFAULT, &e));
  CALL_OK(api->memory_allocate(0, sizeof host, (void**)&buf));
  CALL_OK(api->memory_set(0, buf, 0, sizeof host));
  memset(host, 0, sizeof host);
  g_flag = 0;
  g_seen = -1;
  CALL_OK(api->stream_add_host_callback(a, cb_sleep_then_flag, (void*)(intptr_t)100));
  CALL_OK(api->memory_set_async(0, buf, 0x5A, sizeof host, a));
  CALL_OK(api->event_record(e, a));
  CALL_OK(api->event_query(e, &done));
  REQUIRE(done == 0, "event complete while stream A still sleeps");
  CALL_OK(api->stream_wait_event(b, e));
  CALL_OK(api->memcpy_device_to_host_async(0, host, buf, sizeof host, b));
  CALL_OK(api->stream_add_host_callback(b, cb_see_flag, NULL));
  CALL_OK(api->stream_synchronize(b));
  REQUIRE(g_seen == 1, "stream B ran before stream A's recorded work");
  for (i = 0; i < sizeof host; ++i) REQUIRE(host[i] == 0x5A, "byte %zu is 0x%x", i, host[i]);
  CALL_OK(api->event_query(e, &done));
  REQUIRE(done == 1, "event not complete after B waited for it");
  CALL_OK(api->stream_destroy(a));
  CALL_OK(api->stream_destroy(b));
  CALL_OK(api->event_destroy(e));
  CALL_OK(api->memory_free(0, buf));
  pass();
}

static void check_event_timing(void) {
  cd_stream* s = NULL;
  cd_event *start = NULL, *end = NULL;
  int32_t done = -1;
  float ms = -1.0f, back = 0.0f;
  begin("event_elapsed_time");
  CALL_OK(api->stream_create(0, 0, &s));
  CALL_OK(api->event_create(0, 0, &start));
  CALL_OK(api->event_create(0, 0, &end));
  CALL_OK(api->event_record(start, s));
  CALL_OK(api->stream_add_host_callback(s, cb_sleep, (void*)(intptr_t)20));
  CALL_OK(api->stream_add_host_callback(s, cb_sleep, (void*)(intptr_t)150));
  CALL_OK(api->event_record(end, s));
  CALL_OK(api->event_synchronize(start)); /* the sleeps start now */
  CALL_OK(api->event_query(end, &done));
  REQUIRE(done == 0, "end complete before the sleeps ran");
  CALL_ERR(api->event_elapsed_time(start, end, &ms), CD_STATUS_NOT_READY, "end");
  CALL_OK(api->event_synchronize(end));
  CALL_OK(api->event_query(end, &done));
  REQUIRE(done == 1, "end not complete after event_synchronize");
  CALL_OK(api->event_elapsed_time(start, end, &ms));
  CALL_OK(api->event_elapsed_time(end, start, &back));
  printf("INFO elapsed %.3f ms\n", (double)ms);
  REQUIRE(ms >= 169.0f && ms < 5000.0f, "elapsed %.3f ms for 170 ms of sleep", (double)ms);
  REQUIRE(back == -ms, "reversed order gave %.3f", (double)back);
  CALL_ERR(api->event_elapsed_time(start, end, NULL), CD_STATUS_INVALID_ARGUMENT,
           "milliseconds");
  CALL_OK(api->stream_destroy(s));
  CALL_OK(api->event_destroy(start));
  CALL_OK(api->event_destroy(end));
  pass();
}

/* The exact 20 ms the brief asks for, on its own (two records around a
 * 20 ms host callback). */
static void check_event_timing_20ms(void) {
  cd_stream* s = NULL;
  cd_event *start = NULL, *end = NULL;
  float ms = -1.0f;
  begin("event_elapsed_time_20ms");
  CALL_OK(api->stream_create(0, 0, &s));
  CALL_OK(api->event_create(0, 0, &start));
  CALL_OK(api->event_create(0, 0, &end));
  CALL_OK(api->event_record(start, s));
  CALL_OK(api->stream_add_host_callback(s, cb_sleep, (void*)(intptr_t)20));
  CALL_OK(api->event_record(end, s));
  CALL_OK(api->stream_synchronize(s));
  CALL_OK(api->event_elapsed_time(start, end, &ms));
  REQUIRE(ms >= 19.0f && ms < 2000.0f, "elapsed %.3f ms for a 20 ms sleep", (double)ms);
  CALL_OK(api->stream_destroy(s));
  CALL_OK(api->event_destroy(start));
  CALL_OK(api->event_destroy(end));
  pass();
}

static void check_event_rules(void) {
  cd_stream* s = NULL;
  cd_event *fresh = NULL, *untimed = NULL, *other = NULL;
  int32_t done = -1;
  float ms;
  begin("event_rules");
  CALL_OK(api->stream_create(0, 0, &s));
  CALL_OK(api->event_create(0, 0, &fresh));
  CALL_OK(api->event_create(0, CD_EVENT_DISABLE_TIMING, &untimed));
  CALL_OK(api->event_query(fresh, &done));
  REQUIRE(done == 1, "a never-recorded event is not complete");
  CALL_OK(api->event_synchronize(fresh));
  CALL_ERR(api->event_elapsed_time(fresh, fresh, &ms), CD_STATUS_INVALID_ARGUMENT,
           "never recorded");
  /* a wait on a never-recorded event imposes no wait */
  g_flag = 0;
  CALL_OK(api->stream_wait_event(s, fresh));
  CALL_OK(api->stream_add_host_callback(s, cb_sleep_then_flag, (void*)(intptr_t)1));
  CALL_OK(api->stream_synchronize(s));
  REQUIRE(g_flag == 1, "stream stuck behind a never-recorded event");
  CALL_OK(api->event_record(untimed, s));
  CALL_OK(api->event_synchronize(untimed));
  CALL_ERR(api->event_elapsed_time(untimed, untimed, &ms), CD_STATUS_INVALID_ARGUMENT,
           "CD_EVENT_DISABLE_TIMING");
  CALL_ERR(api->event_create(0, 4u, &other), CD_STATUS_INVALID_ARGUMENT, "flags");
  CALL_ERR(api->event_create(-1, 0, &other), CD_STATUS_INVALID_ARGUMENT, "event_create");
  CALL_ERR(api->event_query(fresh, NULL), CD_STATUS_INVALID_ARGUMENT, "is_complete");
  if (g_devices > 1) {
    CALL_OK(api->event_create(1, 0, &other));
    CALL_ERR(api->event_record(other, s), CD_STATUS_INVALID_ARGUMENT, "event_record");
    CALL_ERR(api->stream_wait_event(s, other), CD_STATUS_INVALID_ARGUMENT, "cpu:1");
    CALL_OK(api->event_destroy(other));
  }
  CALL_OK(api->stream_destroy(s));
  CALL_OK(api->event_destroy(fresh));
  CALL_OK(api->event_destroy(untimed));
  pass();
}

static void check_destroyed_handles(void) {
  cd_stream *s = NULL, *live = NULL;
  cd_event *e = NULL, *live_e = NULL;
  int32_t done;
  char* a = NULL;
  float ms;
  unsigned char host[16];
  begin("destroyed_handles_are_invalid");
  CALL_OK(api->stream_create(0, 0, &s));
  CALL_OK(api->stream_create(0, 0, &live));
  CALL_OK(api->event_create(0, 0, &e));
  CALL_OK(api->event_create(0, 0, &live_e));
  CALL_OK(api->memory_allocate(0, 16, (void**)&a));
  CALL_OK(api->stream_destroy(s));
  CALL_OK(api->event_destroy(e));
  CALL_ERR(api->stream_synchronize(s), CD_STATUS_INVALID_HANDLE, "stream_synchronize");
  CALL_ERR(api->stream_query(s, &done), CD_STATUS_INVALID_HANDLE, "stream_query");
  CALL_ERR(api->stream_destroy(s), CD_STATUS_INVALID_HANDLE, "stream_destroy");
  CALL_ERR(api->stream_add_host_callback(s, cb_sleep, NULL), CD_STATUS_INVALID_HANDLE, "");
  CALL_ERR(api->memcpy_host_to_device_async(0, a, host, 16, s), CD_STATUS_INVALID_HANDLE,
           "memcpy_host_to_device_async");
  CALL_ERR(api->memory_set_async(0, a, 0, 16, s), CD_STATUS_INVALID_HANDLE, "");
  CALL_ERR(api->stream_wait_event(s, live_e), CD_STATUS_INVALID_HANDLE, "");
  CALL_ERR(api->event_record(live_e, s), CD_STATUS_INVALID_HANDLE, "event_record");
  CALL_ERR(api->event_query(e, &done), CD_STATUS_INVALID_HANDLE, "event_query");
  CALL_ERR(api->event_synchronize(e), CD_STATUS_INVALID_HANDLE, "");
  CALL_ERR(api->event_record(e, live), CD_STATUS_INVALID_HANDLE, "");
  CALL_ERR(api->stream_wait_event(live, e), CD_STATUS_INVALID_HANDLE, "");
  CALL_ERR(api->event_elapsed_time(e, live_e, &ms), CD_STATUS_INVALID_HANDLE, "");
  CALL_ERR(api->event_destroy(e), CD_STATUS_INVALID_HANDLE, "event_destroy");
  /* foreign and bogus handles, NULL handles */
  CALL_ERR(api->stream_synchronize((cd_stream*)live_e), CD_STATUS_INVALID_HANDLE, "");
  CALL_ERR(api->event_query((cd_event*)live, &done), CD_STATUS_INVALID_HANDLE, "");
  CALL_ERR(api->stream_synchronize((cd_stream*)(uintptr_t)0x1234), CD_STATUS_INVALID_HANDLE,
           "");
  CALL_ERR(api->stream_synchronize(NULL), CD_STATUS_INVALID_ARGUMENT, "stream is NULL");
  CALL_ERR(api->event_destroy(NULL), CD_STATUS_INVALID_ARGUMENT, "event is NULL");
  CALL_ERR(api->memcpy_device_to_host_async(0, host, a, 16, NULL), CD_STATUS_INVALID_ARGUMENT,
           "");
  /* the live ones still work */
  CALL_OK(api->event_record(live_e, live));
  CALL_OK(api->stream_synchronize(live));
  CALL_OK(api->stream_destroy(live));
  CALL_OK(api->event_destroy(live_e));
  CALL_OK(api->memory_free(0, a));
  pass();
}

/* ------------------------------------------------------------------------ */
/* The copy kernel                                                            */
/* ------------------------------------------------------------------------ */

static size_t itemsize_of(cd_dtype_t dt) {
  switch (dt) {
    case CD_DTYPE_FLOAT64: case CD_DTYPE_INT64: return 8;
    case CD_DTYPE_FLOAT32: case CD_DTYPE_INT32: return 4;
    case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_INT16: return 2;
    default: return 1;
  }
}

static cd_tensor_view make_view(void* data, int64_t byte_offset, const int64_t* shape,
                                const int64_t* strides, int32_t ndim, cd_dtype_t dt,
                                int32_t device) {
  cd_tensor_view v;
  memset(&v, 0, sizeof v);
  v.struct_size = sizeof v;
  v.data = data;
  v.byte_offset = byte_offset;
  v.shape = shape;
  v.strides = strides;
  v.dtype = dt;
  v.ndim = ndim;
  v.format = CD_FORMAT_STRIDED;
  v.device = device;
  return v;
}

static cd_error* launch_copy(cd_stream* s, int32_t device, const cd_tensor_view* in,
                             const cd_tensor_view* out) {
  cd_kernel_context ctx;
  cd_kernel_fn fn = find_kernel("copy", in->dtype);
  memset(&ctx, 0, sizeof ctx);
  ctx.struct_size = sizeof ctx;
  ctx.op = "copy";
  ctx.inputs = &in;
  ctx.outputs = &out;
  ctx.stream = s;
  ctx.num_inputs = 1;
  ctx.num_outputs = 1;
  ctx.device = device;
  return fn ? fn(&ctx) : NULL;
}

/* Host reference: gathers the strided view into a contiguous buffer. */
static void reference_gather(unsigned char* out, const unsigned char* base, int64_t offset,
                             const int64_t* shape, const int64_t* strides, int ndim,
                             size_t item) {
  int64_t index[8] = {0};
  int64_t numel = 1, n, at;
  int d;
  for (d = 0; d < ndim; ++d) numel *= shape[d];
  for (n = 0; n < numel; ++n) {
    at = offset;
    for (d = 0; d < ndim; ++d) at += index[d] * strides[d] * (int64_t)item;
    memcpy(out + (size_t)n * item, base + at, item);
    for (d = ndim - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

/* One copy case: a device buffer of `src_elems` elements seen through
 * (offset, shape, strides) is copied by the kernel into a contiguous output
 * and compared with the host reference. Returns 1 on success (else FAILs). */
static int copy_case(const char* what, cd_stream* s, int32_t dev, cd_dtype_t dt,
                     int64_t elem_offset, const int64_t* shape, const int64_t* strides,
                     int ndim, size_t src_elems) {
  size_t item = itemsize_of(dt), out_bytes = item;
  int64_t contiguous[8];
  unsigned char *src, *expect, *got;
  void *dsrc = NULL, *dout = NULL;
  cd_tensor_view in, out;
  cd_error* e;
  int d, good;
  for (d = ndim - 1; d >= 0; --d) {
    contiguous[d] = (int64_t)(out_bytes / item);
    out_bytes *= (size_t)shape[d];
  }
  src = (unsigned char*)malloc(src_elems * item);
  expect = (unsigned char*)calloc(1, out_bytes + 1);
  got = (unsigned char*)calloc(1, out_bytes + 1);
  fill_pattern(src, src_elems * item, (unsigned)dt + 11u);
  reference_gather(expect, src, elem_offset * (int64_t)item, shape, strides, ndim, item);
  e = api->memory_allocate(dev, src_elems * item, &dsrc);
  if (!e) e = api->memory_allocate(dev, out_bytes, &dout);
  if (!e) e = api->memcpy_host_to_device(dev, dsrc, src, src_elems * item);
  in = make_view(dsrc, elem_offset * (int64_t)item, shape, strides, ndim, dt, dev);
  out = make_view(dout, 0, shape, contiguous, ndim, dt, dev);
  if (!e) e = launch_copy(s, dev, &in, &out);
  if (!e) e = api->stream_synchronize(s);
  if (!e) e = api->memcpy_device_to_host(dev, got, dout, out_bytes);
  good = e == NULL && memcmp(expect, got, out_bytes) == 0;
  if (e) {
    fail_check("%s (dtype %d): [%d] %s", what, (int)dt, (int)api->error_get_code(e),
               api->error_get_message(e));
    api->error_destroy(e);
  } else if (!good) {
    fail_check("%s (dtype %d): output differs from the reference", what, (int)dt);
  }
  api->memory_free(dev, dsrc); /* errors here would repeat the ones above */
  api->memory_free(dev, dout);
  free(src);
  free(expect);
  free(got);
  return good;
}

static void check_copy_kernel_views(void) {
  const int32_t dev = g_devices - 1;
  cd_stream* s = NULL;
  int dt;
  /* a 3x4 matrix seen transposed (4x3) */
  const int64_t t_shape[2] = {4, 3}, t_strides[2] = {1, 4};
  /* a 2x3x4 array permuted to 4x2x3, with a byte offset of 5 elements */
  const int64_t p_shape[3] = {4, 2, 3}, p_strides[3] = {1, 12, 4};
  /* reversed 1-d, and a 2-d view with a negative inner and a zero outer stride */
  const int64_t r_shape[1] = {9}, r_strides[1] = {-1};
  const int64_t b_shape[2] = {3, 5}, b_strides[2] = {0, -2};
  /* rows reversed, columns forward, 2 of every 3 columns (non-mergeable) */
  const int64_t m_shape[3] = {3, 4, 2}, m_strides[3] = {-12, 3, 1};
  /* contiguous (the memcpy path) */
  const int64_t c_shape[2] = {5, 7}, c_strides[2] = {7, 1};
  begin("copy_kernel_strided_views");
  CALL_OK(api->stream_create(dev, 0, &s));
  for (dt = CD_DTYPE_FLOAT32; dt <= CD_DTYPE_BOOL; ++dt) {
    if (!copy_case("transpose", s, dev, dt, 0, t_shape, t_strides, 2, 12)) return;
    if (!copy_case("permute3d", s, dev, dt, 5, p_shape, p_strides, 3, 40)) return;
    if (!copy_case("reverse", s, dev, dt, 8, r_shape, r_strides, 1, 9)) return;
    if (!copy_case("broadcast_negative", s, dev, dt, 8, b_shape, b_strides, 2, 9)) return;
    if (!copy_case("rows_reversed", s, dev, dt, 24, m_shape, m_strides, 3, 36)) return;
    if (!copy_case("contiguous", s, dev, dt, 3, c_shape, c_strides, 2, 40)) return;
    if (!copy_case("scalar", s, dev, dt, 2, NULL, NULL, 0, 4)) return;
  }
  CALL_OK(api->stream_destroy(s));
  pass();
}

static void check_copy_kernel_errors(void) {
  cd_stream *s = NULL, *dead = NULL;
  void *a = NULL, *b = NULL;
  const int64_t shape[2] = {4, 3}, strides[2] = {3, 1}, other_shape[2] = {3, 4};
  const int64_t far_strides[2] = {4, 1}, zero_strides[2] = {0, 1}, empty_shape[2] = {0, 3};
  cd_tensor_view in, out, bad;
  cd_kernel_fn fn = find_kernel("copy", CD_DTYPE_FLOAT32);
  begin("copy_kernel_refuses_bad_views");
  REQUIRE(fn != NULL, "no copy kernel for float32");
  CALL_OK(api->stream_create(0, 0, &s));
  CALL_OK(api->stream_create(0, 0, &dead));
  CALL_OK(api->stream_destroy(dead));
  CALL_OK(api->memory_allocate(0, 48, &a));
  CALL_OK(api->memory_allocate(0, 48, &b));
  in = make_view(a, 0, shape, strides, 2, CD_DTYPE_FLOAT32, 0);
  out = make_view(b, 0, shape, strides, 2, CD_DTYPE_FLOAT32, 0);
  CALL_OK(launch_copy(s, 0, &in, &out));
  bad = make_view(b, 0, other_shape, strides, 2, CD_DTYPE_FLOAT32, 0);
  CALL_ERR(launch_copy(s, 0, &in, &bad), CD_STATUS_INVALID_ARGUMENT, "copy: ");
  bad = make_view(b, 0, shape, strides, 2, CD_DTYPE_INT32, 0);
  CALL_ERR(launch_copy(s, 0, &in, &bad), CD_STATUS_INVALID_ARGUMENT, "int32");
  bad = make_view(a, 0, shape, far_strides, 2, CD_DTYPE_FLOAT32, 0);
  CALL_ERR(launch_copy(s, 0, &bad, &out), CD_STATUS_OUT_OF_RANGE, "overruns");
  bad = make_view(a, 4, shape, strides, 2, CD_DTYPE_FLOAT32, 0);
  CALL_ERR(launch_copy(s, 0, &bad, &out), CD_STATUS_OUT_OF_RANGE, "input 0");
  bad = make_view(b, 0, shape, zero_strides, 2, CD_DTYPE_FLOAT32, 0);
  CALL_ERR(launch_copy(s, 0, &in, &bad), CD_STATUS_INVALID_ARGUMENT, "stride 0");
  bad = in;
  bad.format = 1;
  CALL_ERR(launch_copy(s, 0, &bad, &out), CD_STATUS_INVALID_ARGUMENT, "format");
  bad = in;
  bad.device = 1;
  CALL_ERR(launch_copy(s, 0, &bad, &out), CD_STATUS_INVALID_ARGUMENT, "cpu:1");
  CALL_ERR(launch_copy(dead, 0, &in, &out), CD_STATUS_INVALID_HANDLE, "copy");
  CALL_ERR(fn(NULL), CD_STATUS_INVALID_ARGUMENT, "ctx is NULL");
  /* empty tensors need no memory at all */
  bad = make_view(NULL, 0, empty_shape, strides, 2, CD_DTYPE_FLOAT32, 0);
  CALL_OK(launch_copy(s, 0, &bad, &bad));
  CALL_OK(api->stream_synchronize(s));
  CALL_OK(api->stream_destroy(s));
  CALL_OK(api->memory_free(0, a));
  CALL_OK(api->memory_free(0, b));
  pass();
}

/* ------------------------------------------------------------------------ */
/* Shutdown                                                                   */
/* ------------------------------------------------------------------------ */

static void check_shutdown(void) {
  cd_stream* s = NULL;
  begin("plugin_shutdown_joins_streams");
  CALL_OK(api->stream_create(0, 0, &s));
  g_flag = 0;
  CALL_OK(api->stream_add_host_callback(s, cb_sleep_then_flag, (void*)(intptr_t)50));
  CALL_OK(api->plugin_shutdown()); /* the stream was left alive on purpose */
  REQUIRE(g_flag == 1, "plugin_shutdown returned before the stream's work ran");
  CALL_ERR(api->stream_synchronize(s), CD_STATUS_INVALID_HANDLE, "");
  pass();
}

/* ------------------------------------------------------------------------ */
/* Modes                                                                      */
/* ------------------------------------------------------------------------ */

static void run_suite(void) {
  check_table();
  if (api == NULL) return;
  check_kernels_registered();
  check_device_count();
  check_properties();
  check_properties_small_struct();
  check_current_device();
  check_alloc_free();
  check_memory_info();
  check_sync_copies(0);
  if (g_devices > 1) check_sync_copies(1);
  check_copy_errors();
  check_pinned();
  check_async_ordered();
  check_async_really_async();
  check_callbacks_in_order();
  check_callback_self_sync_refused();
  check_async_error();
  check_device_synchronize();
  check_destroy_drains();
  check_two_streams_joined();
  check_event_timing();
  check_event_timing_20ms();
  check_event_rules();
  check_destroyed_handles();
  check_copy_kernel_views();
  check_copy_kernel_errors();
  check_shutdown();
}

/* Run with CHIPDOCK_CPU_MEMORY_LIMIT=1M. */
static void run_oom(void) {
  void *a = NULL, *b = NULL, *c = NULL;
  size_t free_b = 0, total = 0;
  cd_device_properties p;
  begin("out_of_memory_under_limit");
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  CALL_OK(api->device_get_properties(0, &p));
  REQUIRE(p.total_memory == 1048576u, "total_memory %llu", (unsigned long long)p.total_memory);
  CALL_OK(api->memory_allocate(0, 524288, &a));
  CALL_ERR(api->memory_allocate(0, 614400, &b), CD_STATUS_OUT_OF_MEMORY,
           "memory_allocate: cannot allocate 614400 bytes on cpu:0: 524288 bytes in use of "
           "a 1048576-byte limit");
  REQUIRE(b == NULL, "out-pointer written on failure");
  CALL_OK(api->memory_get_info(0, &free_b, &total));
  REQUIRE(free_b == 524288 && total == 1048576, "free %zu total %zu", free_b, total);
  if (g_devices > 1) { /* each device has its own budget */
    CALL_OK(api->memory_allocate(1, 614400, &c));
    CALL_OK(api->memory_free(1, c));
  }
  CALL_OK(api->memory_free(0, a));
  CALL_OK(api->memory_allocate(0, 614400, &b));
  CALL_OK(api->memory_free(0, b));
  CALL_ERR(api->memory_allocate(0, 1048577, &b), CD_STATUS_OUT_OF_MEMORY, "1048577");
  pass();
}

/* Run with an invalid environment: no devices, and a reason. */
static void run_badenv(void) {
  int32_t count = -1;
  void* p = NULL;
  begin("invalid_environment_reported");
  CALL_ERR(api->device_get_count(&count), CD_STATUS_UNAVAILABLE, "CHIPDOCK_CPU_");
  REQUIRE(count == -1, "count written on failure");
  CALL_ERR(api->memory_allocate(0, 16, &p), CD_STATUS_INVALID_ARGUMENT, "does not exist");
  pass();
}

/* Reads device memory directly on the host: fine in normal mode, a SIGSEGV
 * in strict mode (that is the point of strict mode). */
static void run_deref(void) {
  struct rlimit no_core;
  char* p = NULL;
  no_core.rlim_cur = 0;
  no_core.rlim_max = 0;
  setrlimit(RLIMIT_CORE, &no_core); /* the crash is expected: no core file */
  begin("host_dereference");
  CALL_OK(api->memory_allocate(0, 64, (void**)&p));
  CALL_OK(api->memcpy_host_to_device(0, p, "chipdock", 9));
  printf("INFO reading %p on the host\n", (void*)p);
  fflush(stdout);
  printf("DEREF %c\n", *(volatile char*)p);
  fflush(stdout);
  CALL_OK(api->memory_free(0, p));
  pass();
}

int main(int argc, char** argv) {
  const char* env;
  cd_plugin_entry_fn entry;
  if (argc != 3) {
    fprintf(stderr, "usage: %s <libchipdock_cpu.so> suite|oom|deref|badenv\n", argv[0]);
    return 2;
  }
  g_main_thread = pthread_self();
  env = getenv("CHIPDOCK_CPU_STRICT");
  g_strict = env != NULL && strcmp(env, "1") == 0;
  env = getenv("CHIPDOCK_CPU_DEVICES");
  g_devices = env != NULL ? (int32_t)atoi(env) : 1;
  entry = load_entry(argv[1]);
  check_entry(entry);
  g_core = make_core(CD_ABI_VERSION_MAJOR);
  api = entry(&g_core);
  if (api == NULL) {
    printf("FAIL entry: NULL table for a matching core\n");
    return 1;
  }
  if (strcmp(argv[2], "suite") == 0) {
    run_suite();
  } else if (strcmp(argv[2], "oom") == 0) {
    run_oom();
  } else if (strcmp(argv[2], "deref") == 0) {
    run_deref();
  } else if (strcmp(argv[2], "badenv") == 0) {
    run_badenv();
  } else {
    fprintf(stderr, "unknown mode '%s'\n", argv[2]);
    return 2;
  }
  printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "OK", g_failures);
  return g_failures ? 1 : 0;
}
