// Entry points for the double's own tests (tests/test_npu_double.py calls
// them through ctypes): the element conversions, and one op that runs the
// whole plan -> launch -> HostTensor path with a workspace. Prefixed cdsim_,
// nothing of CANN's; the backend never resolves them.
#include <cstring>

#include "sim.h"

extern "C" {

// *out (dtype_bytes(dtype) bytes) = `value` converted to `dtype`.
aclnnStatus cdsim_test_store_double(int32_t dtype, double value, void* out) {
  return cdsim::guarded_op([&] {
    cdsim::store_double(out, static_cast<aclDataType>(dtype), value);
    return CD_ACLNN_SUCCESS;
  });
}

aclnnStatus cdsim_test_store_int(int32_t dtype, int64_t value, void* out) {
  return cdsim::guarded_op([&] {
    cdsim::store_int(out, static_cast<aclDataType>(dtype), value);
    return CD_ACLNN_SUCCESS;
  });
}

aclnnStatus cdsim_test_load(int32_t dtype, const void* in, double* as_double, int64_t* as_int) {
  return cdsim::guarded_op([&] {
    *as_double = cdsim::load_double(in, static_cast<aclDataType>(dtype));
    *as_int = cdsim::load_int(in, static_cast<aclDataType>(dtype));
    return CD_ACLNN_SUCCESS;
  });
}

// "cdsim_test_fill": out[i] = value + i, on the stream. With
// workspace_bytes >= 8 the value travels through the workspace (written
// there first, read back), so a wrong workspace shows in the result.
aclnnStatus cdsim_test_fill_plan(aclTensor* out, double value, uint64_t workspace_bytes, uint64_t* workspaceSize,
                                 aclOpExecutor** executor) {
  return cdsim::guarded_op([&] {
    cdsim::TensorInfo target = cdsim::info(out, "cdsim_test_fill: out");
    if (cdsim::dtype_bytes(target.dtype) == 0)
      cdsim::raise(CD_ACLNN_ERR_PARAM_INVALID, "cdsim_test_fill: out has unsupported dtype %s",
                   cdsim::dtype_name(target.dtype));
    cdsim::Plan plan{"cdsim_test_fill", workspace_bytes, [target, value, workspace_bytes](char* workspace) {
                       double start = value;
                       if (workspace_bytes >= sizeof(double)) {
                         std::memcpy(workspace, &value, sizeof value);
                         std::memcpy(&start, workspace, sizeof start);
                       }
                       cdsim::HostTensor tensor(target);
                       for (cdsim::Index it(tensor.shape()); it.valid(); it.next())
                         tensor.set(it.linear(), start + static_cast<double>(it.linear()));
                     }};
    return cdsim::plan(std::move(plan), workspaceSize, executor);
  });
}

aclnnStatus cdsim_test_fill(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream) {
  return cdsim::launch("cdsim_test_fill", workspace, workspaceSize, executor, stream);
}

}  // extern "C"
