/*
 * abi_symbols.c: names every public name of the chipdock device ABI.
 *
 * device_api/tests/test_headers_compile.py compiles this file as C99 and as
 * C++17 with warnings as errors, and checks that every CD_ macro and every
 * slot in the headers is named here. So:
 *   - renaming or removing a name breaks the build of this file;
 *   - renumbering a code, dtype or flag fails a CD_STATIC_ASSERT below;
 *   - adding a name without adding it here fails the completeness test,
 *     which is the reminder to pin its value and write the CHANGELOG line.
 * Append only, in header order. Numbered values are part of the ABI.
 */
#include "chipdock/device_api.h"

/* ---- cd_base.h ----------------------------------------------------------- */
CD_STATIC_ASSERT(CD_ABI_VERSION_MAJOR == 1, abi_major);
CD_STATIC_ASSERT(CD_ABI_VERSION_MINOR >= 0, abi_minor); /* grows with minors */

CD_STATIC_ASSERT(CD_STATUS_OK == 0, status_ok);
CD_STATIC_ASSERT(CD_STATUS_INVALID_ARGUMENT == 1, status_invalid_argument);
CD_STATIC_ASSERT(CD_STATUS_INVALID_HANDLE == 2, status_invalid_handle);
CD_STATIC_ASSERT(CD_STATUS_OUT_OF_MEMORY == 3, status_out_of_memory);
CD_STATIC_ASSERT(CD_STATUS_UNIMPLEMENTED == 4, status_unimplemented);
CD_STATIC_ASSERT(CD_STATUS_NOT_READY == 5, status_not_ready);
CD_STATIC_ASSERT(CD_STATUS_DEVICE_ERROR == 6, status_device_error);
CD_STATIC_ASSERT(CD_STATUS_UNAVAILABLE == 7, status_unavailable);
CD_STATIC_ASSERT(CD_STATUS_OUT_OF_RANGE == 8, status_out_of_range);
CD_STATIC_ASSERT(CD_STATUS_INTERNAL == 9, status_internal);
CD_STATIC_ASSERT(CD_STATUS_MAX == 0x7fffffff, status_max);

CD_STATIC_ASSERT(CD_DTYPE_INVALID == 0, dtype_invalid);
CD_STATIC_ASSERT(CD_DTYPE_FLOAT32 == 1, dtype_float32);
CD_STATIC_ASSERT(CD_DTYPE_FLOAT16 == 2, dtype_float16);
CD_STATIC_ASSERT(CD_DTYPE_BFLOAT16 == 3, dtype_bfloat16);
CD_STATIC_ASSERT(CD_DTYPE_FLOAT64 == 4, dtype_float64);
CD_STATIC_ASSERT(CD_DTYPE_INT8 == 5, dtype_int8);
CD_STATIC_ASSERT(CD_DTYPE_INT16 == 6, dtype_int16);
CD_STATIC_ASSERT(CD_DTYPE_INT32 == 7, dtype_int32);
CD_STATIC_ASSERT(CD_DTYPE_INT64 == 8, dtype_int64);
CD_STATIC_ASSERT(CD_DTYPE_UINT8 == 9, dtype_uint8);
CD_STATIC_ASSERT(CD_DTYPE_BOOL == 10, dtype_bool);
CD_STATIC_ASSERT(CD_DTYPE_COUNT >= 11, dtype_count); /* grows with minors */
CD_STATIC_ASSERT(CD_DTYPE_MAX == 0x7fffffff, dtype_max);
CD_STATIC_ASSERT(CD_DTYPE_BIT(CD_DTYPE_BOOL) == 1024u, dtype_bit);

CD_STATIC_ASSERT(CD_STRUCT_SIZE(cd_extension, type) == sizeof(size_t) + sizeof(void*) + 4, struct_size);

CD_STATIC_ASSERT(CD_LOG_DEBUG == 0, log_debug);
CD_STATIC_ASSERT(CD_LOG_INFO == 1, log_info);
CD_STATIC_ASSERT(CD_LOG_WARNING == 2, log_warning);
CD_STATIC_ASSERT(CD_LOG_ERROR == 3, log_error);

/* CD_EXTERN_C, CD_EXTERN_C_BEGIN/END and CD_EXPORT, the way a plugin uses them. */
CD_EXTERN_C_BEGIN
int cd_test_extern_c_block(void);
CD_EXTERN_C_END
CD_EXTERN_C CD_EXPORT int cd_test_exported(void);

/* ---- cd_collectives.h ------------------------------------------------------ */
CD_STATIC_ASSERT(CD_COMM_UNIQUE_ID_BYTES == 128, unique_id_bytes);
CD_STATIC_ASSERT(CD_REDUCE_SUM == 0, reduce_sum);
CD_STATIC_ASSERT(CD_REDUCE_PROD == 1, reduce_prod);
CD_STATIC_ASSERT(CD_REDUCE_MAX == 2, reduce_max);
CD_STATIC_ASSERT(CD_REDUCE_MIN == 3, reduce_min);
CD_STATIC_ASSERT(CD_REDUCE_AVG == 4, reduce_avg);

/* ---- cd_kernel.h ----------------------------------------------------------- */
CD_STATIC_ASSERT(CD_FORMAT_STRIDED == 0, format_strided);
CD_STATIC_ASSERT(CD_ATTR_INT == 1, attr_int);
CD_STATIC_ASSERT(CD_ATTR_FLOAT == 2, attr_float);
CD_STATIC_ASSERT(CD_ATTR_STRING == 3, attr_string);
CD_STATIC_ASSERT(CD_ATTR_INTS == 4, attr_ints);
CD_STATIC_ASSERT(CD_ATTR_FLOATS == 5, attr_floats);
CD_STATIC_ASSERT(CD_KERNEL_FLAGS_DEFAULT == 0u, kernel_flags_default);
CD_STATIC_ASSERT(CD_KERNEL_CONTIGUOUS_INPUTS == 1u, kernel_contiguous_inputs);
CD_STATIC_ASSERT(CD_EXTENSION_TENSOR_VERSION == 1, extension_tensor_version);
/* cd_tensor_version is an extension: the cd_extension header, then its fields. */
CD_STATIC_ASSERT(offsetof(cd_tensor_version, type) == offsetof(cd_extension, type), version_type);
CD_STATIC_ASSERT(offsetof(cd_tensor_version, storage_id) == sizeof(cd_extension), version_id);
CD_STATIC_ASSERT(sizeof(cd_tensor_version) == sizeof(cd_extension) + 16, version_size);

#define CD_TEST_CORE_SLOT(name) offsetof(cd_core_api, name)
extern const size_t cd_test_core_slots[];
const size_t cd_test_core_slots[] = {
    CD_TEST_CORE_SLOT(struct_size),
    CD_TEST_CORE_SLOT(next),
    CD_TEST_CORE_SLOT(abi_major),
    CD_TEST_CORE_SLOT(abi_minor),
    CD_TEST_CORE_SLOT(core_version),
    CD_TEST_CORE_SLOT(kernel_register),
    CD_TEST_CORE_SLOT(workspace_allocate),
    CD_TEST_CORE_SLOT(log),
};

/* ---- device_api.h ---------------------------------------------------------- */
CD_STATIC_ASSERT(CD_DLPACK_NONE == 0, dlpack_none);
CD_STATIC_ASSERT(CD_DLPACK_CPU == 1, dlpack_cpu);
CD_STATIC_ASSERT(CD_DLPACK_CUDA == 2, dlpack_cuda);
CD_STATIC_ASSERT(CD_DLPACK_CUDA_HOST == 3, dlpack_cuda_host);
CD_STATIC_ASSERT(CD_DLPACK_ROCM == 10, dlpack_rocm);
CD_STATIC_ASSERT(CD_DLPACK_EXT_DEV == 12, dlpack_ext_dev);
CD_STATIC_ASSERT(CD_DLPACK_ONEAPI == 14, dlpack_oneapi);

CD_STATIC_ASSERT(CD_STREAM_FLAGS_DEFAULT == 0u, stream_flags_default);
CD_STATIC_ASSERT(CD_EVENT_FLAGS_DEFAULT == 0u, event_flags_default);
CD_STATIC_ASSERT(CD_EVENT_DISABLE_TIMING == 1u, event_disable_timing);

/* The v1.0 table ends at comm_group_end; later minors only append. */
CD_STATIC_ASSERT(CD_PLUGIN_API_SIZE_V1_0 ==
                     offsetof(cd_plugin_api, comm_group_end) + sizeof(void (*)(void)),
                 plugin_api_size_v1_0);
CD_STATIC_ASSERT(sizeof(cd_plugin_api) >= CD_PLUGIN_API_SIZE_V1_0, plugin_api_size);

extern const char cd_test_entry_symbol[];
const char cd_test_entry_symbol[] = CD_PLUGIN_ENTRY_SYMBOL; /* "chipdock_plugin_entry" */
extern const cd_plugin_entry_fn cd_test_entry_type;
const cd_plugin_entry_fn cd_test_entry_type = NULL;

/* Every field and slot of cd_plugin_api, by name, in table order. */
#define CD_TEST_SLOT(name) offsetof(cd_plugin_api, name)
extern const size_t cd_test_plugin_slots[];
const size_t cd_test_plugin_slots[] = {
    CD_TEST_SLOT(struct_size),
    CD_TEST_SLOT(next),
    CD_TEST_SLOT(abi_major),
    CD_TEST_SLOT(abi_minor),
    CD_TEST_SLOT(name),
    CD_TEST_SLOT(device_type),
    CD_TEST_SLOT(version),
    CD_TEST_SLOT(error_get_code),
    CD_TEST_SLOT(error_get_message),
    CD_TEST_SLOT(error_destroy),
    CD_TEST_SLOT(plugin_shutdown),
    CD_TEST_SLOT(device_get_count),
    CD_TEST_SLOT(device_get_properties),
    CD_TEST_SLOT(device_set_current),
    CD_TEST_SLOT(device_get_current),
    CD_TEST_SLOT(device_synchronize),
    CD_TEST_SLOT(memory_allocate),
    CD_TEST_SLOT(memory_free),
    CD_TEST_SLOT(host_memory_allocate),
    CD_TEST_SLOT(host_memory_free),
    CD_TEST_SLOT(memory_get_info),
    CD_TEST_SLOT(memory_set),
    CD_TEST_SLOT(memory_set_async),
    CD_TEST_SLOT(memcpy_host_to_device),
    CD_TEST_SLOT(memcpy_device_to_host),
    CD_TEST_SLOT(memcpy_device_to_device),
    CD_TEST_SLOT(memcpy_host_to_device_async),
    CD_TEST_SLOT(memcpy_device_to_host_async),
    CD_TEST_SLOT(memcpy_device_to_device_async),
    CD_TEST_SLOT(stream_create),
    CD_TEST_SLOT(stream_destroy),
    CD_TEST_SLOT(stream_synchronize),
    CD_TEST_SLOT(stream_query),
    CD_TEST_SLOT(stream_wait_event),
    CD_TEST_SLOT(stream_add_host_callback),
    CD_TEST_SLOT(event_create),
    CD_TEST_SLOT(event_destroy),
    CD_TEST_SLOT(event_record),
    CD_TEST_SLOT(event_synchronize),
    CD_TEST_SLOT(event_query),
    CD_TEST_SLOT(event_elapsed_time),
    CD_TEST_SLOT(kernels_register),
    CD_TEST_SLOT(comm_get_unique_id),
    CD_TEST_SLOT(comm_init_rank),
    CD_TEST_SLOT(comm_destroy),
    CD_TEST_SLOT(comm_all_reduce),
    CD_TEST_SLOT(comm_broadcast),
    CD_TEST_SLOT(comm_reduce),
    CD_TEST_SLOT(comm_all_gather),
    CD_TEST_SLOT(comm_reduce_scatter),
    CD_TEST_SLOT(comm_send),
    CD_TEST_SLOT(comm_recv),
    CD_TEST_SLOT(comm_group_start),
    CD_TEST_SLOT(comm_group_end),
};
