"""Calls the simulated Ascend runtime's aclnn planning functions (aclnnXxxGetWorkspaceSize) through ctypes.

Not a test module: test_npu_reduce.py and test_npu_nn.py prepend this file's text to the checks they run in a
fresh interpreter (the double is opened by path, so nothing of chipdock's plug-in loading is involved).
"""

import ctypes
import os

import chipdock_npu

d = chipdock_npu.test_double_dir()
acl = ctypes.CDLL(os.path.join(d, "libascendcl.so"), mode=ctypes.RTLD_GLOBAL)
nnop = ctypes.CDLL(os.path.join(d, "libnnopbase.so"), mode=ctypes.RTLD_GLOBAL)
ops = ctypes.CDLL(os.path.join(d, "libopapi.so"))
acl.aclGetRecentErrMsg.restype = ctypes.c_char_p
ACL_FLOAT, ACL_FLOAT16, ACL_INT64, ACL_BF16, ND = 0, 1, 9, 27, 2
I64, U64, I32, I8, B, P = ctypes.c_int64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int8, ctypes.c_bool, ctypes.c_void_p
P64 = ctypes.POINTER(I64)
nnop.aclCreateTensor.restype = P
nnop.aclCreateTensor.argtypes = [P64, U64, I32, P64, I64, I32, P64, U64, P]
nnop.aclCreateIntArray.restype = P
nnop.aclCreateIntArray.argtypes = [P64, U64]


def arr(values: list) -> ctypes.Array:
    return (I64 * max(len(values), 1))(*values)


def tensor(shape: list, dtype: int) -> ctypes.c_void_p:
    """A C-contiguous descriptor without data (planning never reads it)."""
    strides, step = [], 1
    for s in reversed(shape):
        strides.insert(0, step)
        step *= max(s, 1)
    n = 1
    for s in shape:
        n *= s
    return P(nnop.aclCreateTensor(arr(shape), len(shape), dtype, arr(strides), 0, ND, arr([n]), 1, None))


def ints(*values: int) -> ctypes.c_void_p:
    return P(nnop.aclCreateIntArray(arr(list(values)), len(values)))


def call(fn: ctypes._CFuncPtr, *args: object) -> dict:
    """Plans one op: its status, the workspace it asks for, and the runtime's message when it refuses."""
    size, executor = U64(0), P()
    status = fn(*args, ctypes.byref(size), ctypes.byref(executor))
    return {"status": status, "workspace": size.value,
            "message": (acl.aclGetRecentErrMsg() or b"").decode() if status else ""}
