/*
 * load_driver.c: a minimal stand-in for the chipdock core's loader, in C99.
 *
 *   load_driver probe <library> [core_major]
 *       dlopen, find the entry, negotiate, check the table the way the core
 *       does, ask for the device count; print what it saw as key=value
 *       lines. Exit 0 if the core would accept the plugin, 2 if it would
 *       refuse it (a "refused=<reason>" line says why), 3 if the library or
 *       its entry symbol cannot be loaded.
 *   load_driver run <library>
 *       probe, then drive device 0 through the table: properties, memory
 *       info, allocate, memset, the six copies (round trip), out-of-range and
 *       double-free detection, streams, events with timing, host callbacks,
 *       stream_wait_event, destroy, shutdown. Exit 0 on success, 1 on the
 *       first failure (a "FAIL:" line says which call and why).
 *
 * It proves the backend kit end to end without the Python core. It does not
 * read the manifest: the tests compare the printed table fields with it.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chipdock/device_api.h"

/* True if the plugin's table is large enough to hold `field`. */
#define HAS(api, field) ((api)->struct_size >= CD_STRUCT_SIZE(cd_plugin_api, field))
/* The slot if the table holds it, else NULL (the core's rule). */
#define SLOT(api, field) (HAS(api, field) ? (api)->field : NULL)

static const cd_plugin_api* api;

/* ---- the core services handed to the plugin ----------------------------- */
static cd_status_t core_kernel_register(cd_kernel_registry* registry, const cd_kernel_def* def) {
  (void)registry;
  return def != NULL && def->op != NULL && def->fn != NULL ? CD_STATUS_OK
                                                           : CD_STATUS_INVALID_ARGUMENT;
}
static cd_status_t core_workspace_allocate(const cd_kernel_context* ctx, size_t bytes,
                                           void** out) {
  (void)ctx, (void)bytes, (void)out;
  return CD_STATUS_UNIMPLEMENTED;
}
static void core_log(cd_log_level_t level, const char* message) {
  printf("log=%d %s\n", (int)level, message != NULL ? message : "(null)");
}

/* ---- checking helpers ---------------------------------------------------- */
/* Prints a failure and destroys `error`; returns 1 if `error` was NULL. */
static int ok(const char* what, cd_error* error) {
  if (error == NULL) return 1;
  printf("FAIL: %s: code %d: %s\n", what, (int)api->error_get_code(error),
         api->error_get_message(error));
  api->error_destroy(error);
  return 0;
}

/* Returns 1 if `error` is an error with `code` (and destroys it). */
static int fails_with(const char* what, cd_error* error, cd_status_t code) {
  cd_status_t got;
  if (error == NULL) {
    printf("FAIL: %s: succeeded, expected code %d\n", what, (int)code);
    return 0;
  }
  got = api->error_get_code(error);
  if (got != code) printf("FAIL: %s: code %d (%s), expected %d\n", what, (int)got,
                          api->error_get_message(error), (int)code);
  api->error_destroy(error);
  return got == code;
}

static int check(const char* what, int condition) {
  if (!condition) printf("FAIL: %s\n", what);
  return condition;
}

#define TRY(call) do { if (!ok(#call, (call))) return 1; } while (0)
#define EXPECT(call, code) do { if (!fails_with(#call, (call), (code))) return 1; } while (0)
#define CHECK(cond) do { if (!check(#cond, (cond))) return 1; } while (0)

/* ---- probe: what the core does at load time ------------------------------ */
static int probe(const char* path, int32_t core_major, void** handle) {
  static cd_core_api core;
  void* sym;
  cd_plugin_entry_fn entry;
  char missing[512] = "";
  int32_t count = 0;
  cd_error* error;

  *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (*handle == NULL) {
    printf("dlopen=failed: %s\n", dlerror());
    return 3;
  }
  printf("dlopen=ok\n");
  sym = dlsym(*handle, CD_PLUGIN_ENTRY_SYMBOL);
  if (sym == NULL) {
    printf("entry=missing: %s\n", dlerror());
    return 3;
  }
  printf("entry=found\n");
  memcpy(&entry, &sym, sizeof(entry)); /* object to function pointer, POSIX-style */

  core.struct_size = sizeof(core);
  core.abi_major = core_major;
  core.abi_minor = CD_ABI_VERSION_MINOR;
  core.core_version = "load_driver";
  core.kernel_register = core_kernel_register;
  core.workspace_allocate = core_workspace_allocate;
  core.log = core_log;
  api = entry(&core);
  if (api == NULL) {
    printf("table=null\nrefused=the plugin refused this core (entry returned NULL)\n");
    return 2;
  }
  printf("table=ok\nstruct_size=%zu\nv1_0_size=%zu\nmemory_allocate_offset=%zu\n",
         api->struct_size, (size_t)CD_PLUGIN_API_SIZE_V1_0,
         offsetof(cd_plugin_api, memory_allocate));
  printf("abi_major=%d\nabi_minor=%d\n", (int)api->abi_major, (int)api->abi_minor);
  printf("name=%s\ndevice_type=%s\nversion=%s\n", api->name ? api->name : "(null)",
         api->device_type ? api->device_type : "(null)", api->version ? api->version : "(null)");
  if (api->abi_major != CD_ABI_VERSION_MAJOR) {
    printf("refused=built for ABI major %d, this core speaks %d\n", (int)api->abi_major,
           CD_ABI_VERSION_MAJOR);
    return 2;
  }
  if (api->struct_size < CD_PLUGIN_API_SIZE_V1_0) {
    printf("refused=table of %zu bytes is smaller than the v1.0 table (%zu)\n",
           api->struct_size, (size_t)CD_PLUGIN_API_SIZE_V1_0);
    return 2;
  }
  /* The slots device_api.h marks "Required"; all lie within the v1.0 table. */
#define REQUIRED(field) \
  if (api->field == NULL) strcat(strcat(missing, missing[0] ? "," : ""), #field)
  REQUIRED(error_get_code); REQUIRED(error_get_message); REQUIRED(error_destroy);
  REQUIRED(device_get_count); REQUIRED(device_get_properties); REQUIRED(memory_allocate);
  REQUIRED(memory_free); REQUIRED(memcpy_host_to_device); REQUIRED(memcpy_device_to_host);
  REQUIRED(memcpy_device_to_device); REQUIRED(stream_create); REQUIRED(stream_destroy);
  REQUIRED(stream_synchronize); REQUIRED(event_create); REQUIRED(event_destroy);
  REQUIRED(event_record); REQUIRED(event_synchronize); REQUIRED(event_query);
#undef REQUIRED
  printf("null_required=%s\n", missing);
  if (missing[0] != '\0') {
    printf("refused=required slots are NULL: %s\n", missing);
    return 2;
  }
  error = api->device_get_count(&count);
  if (error != NULL) {
    printf("device_count=0\ndevice_error=%d: %s\n", (int)api->error_get_code(error),
           api->error_get_message(error));
    api->error_destroy(error);
  } else {
    printf("device_count=%d\n", (int)count);
  }
  printf("accepted=1\n");
  return 0;
}

/* ---- run: one device through the whole table ----------------------------- */
static void on_host(void* user_data) { ++*(int*)user_data; }

static int run(void) {
  enum { N = 4096 };
  static unsigned char in[N], out[N];
  cd_device_properties props;
  void *a = NULL, *b = NULL;
  cd_stream *stream = NULL, *other = NULL;
  cd_event *start = NULL, *end = NULL;
  size_t free_bytes = 0, total_bytes = 0, i;
  int32_t count = 0, done = 0;
  int callbacks = 0;
  float ms = -1.0f;

  TRY(api->device_get_count(&count));
  CHECK(count >= 1);
  memset(&props, 0, sizeof(props));
  props.struct_size = sizeof(props);
  TRY(api->device_get_properties(0, &props));
  CHECK(props.struct_size == sizeof(props)); /* the header stays the caller's */
  CHECK(memchr(props.name, '\0', sizeof(props.name)) != NULL && props.name[0] != '\0');
  printf("device_name=%s\n", props.name);
  EXPECT(api->device_get_properties(count, &props), CD_STATUS_INVALID_ARGUMENT);
  if (SLOT(api, memory_get_info) != NULL) {
    TRY(api->memory_get_info(0, &free_bytes, &total_bytes));
    CHECK(free_bytes <= total_bytes);
  }

  for (i = 0; i < N; ++i) in[i] = (unsigned char)(i * 7 + 1);
  TRY(api->memory_allocate(0, N, &a));
  TRY(api->memory_allocate(0, N, &b));
  CHECK(a != NULL && b != NULL && ((size_t)a % 256) == 0 && ((size_t)b % 256) == 0);
  TRY(api->memcpy_host_to_device(0, a, in, N));
  TRY(api->memcpy_device_to_device(0, b, a, N));
  TRY(api->memcpy_device_to_host(0, out, b, N));
  CHECK(memcmp(in, out, N) == 0);
  EXPECT(api->memcpy_device_to_host(0, out, a, N + 1), CD_STATUS_OUT_OF_RANGE);
  if (SLOT(api, memory_set) != NULL) {
    TRY(api->memory_set(0, b, 0x1AB, N)); /* the low byte, 0xAB */
    TRY(api->memcpy_device_to_host(0, out, b, N));
    CHECK(out[0] == 0xAB && out[N - 1] == 0xAB);
  }

  TRY(api->stream_create(0, CD_STREAM_FLAGS_DEFAULT, &stream));
  TRY(api->stream_create(0, CD_STREAM_FLAGS_DEFAULT, &other));
  TRY(api->event_create(0, CD_EVENT_FLAGS_DEFAULT, &start));
  TRY(api->event_create(0, CD_EVENT_FLAGS_DEFAULT, &end));
  TRY(api->event_query(start, &done)); /* a new event counts as complete */
  CHECK(done == 1);
  TRY(api->event_record(start, stream));
  memset(out, 0, N);
  if (SLOT(api, memcpy_host_to_device_async) != NULL) {
    TRY(api->memcpy_host_to_device_async(0, a, in, N, stream));
    TRY(api->memcpy_device_to_device_async(0, b, a, N, stream));
    TRY(api->memcpy_device_to_host_async(0, out, b, N, stream));
  } else {
    TRY(api->memcpy_device_to_host(0, out, a, N));
  }
  if (SLOT(api, stream_add_host_callback) != NULL)
    TRY(api->stream_add_host_callback(stream, on_host, &callbacks));
  TRY(api->event_record(end, stream));
  TRY(api->stream_synchronize(stream));
  CHECK(memcmp(in, out, N) == 0);
  CHECK(SLOT(api, stream_add_host_callback) == NULL || callbacks == 1);
  TRY(api->event_synchronize(end));
  TRY(api->event_query(end, &done));
  CHECK(done == 1);
  if (SLOT(api, event_elapsed_time) != NULL) {
    TRY(api->event_elapsed_time(start, end, &ms));
    CHECK(ms >= 0.0f);
  }
  if (SLOT(api, stream_wait_event) != NULL) {
    TRY(api->stream_wait_event(other, end));
    TRY(api->stream_synchronize(other));
  }
  if (SLOT(api, stream_query) != NULL) {
    TRY(api->stream_query(stream, &done));
    CHECK(done == 1);
  }

  TRY(api->event_destroy(start));
  TRY(api->event_destroy(end));
  TRY(api->stream_destroy(other));
  TRY(api->stream_destroy(stream));
  EXPECT(api->stream_synchronize(stream), CD_STATUS_INVALID_HANDLE);
  TRY(api->memory_free(0, a));
  TRY(api->memory_free(0, b));
  EXPECT(api->memory_free(0, a), CD_STATUS_INVALID_ARGUMENT);
  TRY(api->memory_free(0, NULL));
  if (SLOT(api, plugin_shutdown) != NULL) TRY(api->plugin_shutdown());
  printf("run=ok\n");
  return 0;
}

int main(int argc, char** argv) {
  void* handle = NULL;
  int status;
  int32_t core_major = CD_ABI_VERSION_MAJOR;
  setvbuf(stdout, NULL, _IONBF, 0); /* keep output ordered if the plugin crashes */
  if (argc < 3 || (strcmp(argv[1], "probe") != 0 && strcmp(argv[1], "run") != 0)) {
    fprintf(stderr, "usage: %s probe|run <library> [core_major]\n", argv[0]);
    return 64;
  }
  if (argc > 3) core_major = (int32_t)atoi(argv[3]);
  status = probe(argv[2], core_major, &handle);
  if (status == 0 && strcmp(argv[1], "run") == 0) status = run();
  if (handle != NULL) dlclose(handle);
  return status;
}
