"""The npu backend's elementwise family on the simulated Ascend runtime: add sub mul div pow maximum minimum, the
comparisons, logic, where, cast, and the unary math and activations (src/kernels/elementwise*.cpp over
test_double/ops/elementwise_*.cpp).

The conformance suite judges the values (.ci/test runs the whole suite on the double); these tests add what it does
not see: the registered dtypes against CANN's docs and the manifest's declared gaps, the places where an aclnn op's
documented behaviour differs from chipdock's and the backend composes around it (each shown twice: the double's raw
aclnn op doing what CANN documents, then chipdock's op giving chipdock's answer), and the error path of a failing
aclnn call inside a composed kernel.
"""

from __future__ import annotations

import json

import pytest

FLOAT = {"float32", "float16", "bfloat16", "float64"}
INT = {"int8", "int16", "int32", "int64", "uint8"}
NUMERIC = FLOAT | INT
ALL = NUMERIC | {"bool"}
HALF_AND_SINGLE = FLOAT - {"float64"}
# What the backend registers (by its first input's dtype), from the Atlas A2 dtype lists of each aclnn op's docs.
EXPECTED = {
    **{op: NUMERIC for op in ("add", "sub", "mul", "div", "maximum", "minimum", "abs", "clip", "lt", "le", "gt",
                              "ge")},
    **{op: FLOAT for op in ("pow", "exp", "log", "sqrt", "rsqrt", "sin", "cos")},
    **{op: HALF_AND_SINGLE for op in ("tanh", "sigmoid", "leaky_relu", "gelu", "silu")},
    "erf": FLOAT - {"bfloat16"},
    "neg": {"float32", "float16", "bfloat16", "float64", "int8", "int32", "int64"},
    "relu": {"float32", "float16", "bfloat16", "int8", "int32", "int64"},
    "eq": ALL, "ne": ALL, "cast": ALL,
    "logical_and": {"bool"}, "logical_or": {"bool"}, "logical_not": {"bool"}, "where": {"bool"},
}


def _last_json(proc) -> object:
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_registered_dtypes_follow_the_docs_and_every_gap_is_declared(run_fresh, npu_double_env):
    got = _last_json(run_fresh(
        """
        import json, collections, chipdock, chipdock_npu
        from chipdock import _C
        from chipdock._dtypes import BY_CODE
        chipdock.backends()
        npu, cpu = collections.defaultdict(set), collections.defaultdict(set)
        for table, backend in ((npu, "npu"), (cpu, "cpu")):
            for op, codes in _C.kernels(backend):
                table[op].add(tuple(BY_CODE[c].name for c in codes))
        manifest = json.load(open(chipdock_npu.manifest_path()))
        print(json.dumps({"npu": {k: sorted(v) for k, v in npu.items()}, "cpu": {k: sorted(v) for k, v in cpu.items()},
                          "unsupported": manifest.get("unsupported", [])}))
        """,
        npu_double_env,
    ))
    npu = {op: {tuple(s) for s in sigs} for op, sigs in got["npu"].items()}
    cpu = {op: {tuple(s) for s in sigs} for op, sigs in got["cpu"].items()}
    declared = {e["op"]: e for e in got["unsupported"] if e["op"] in EXPECTED}
    for op, dtypes in EXPECTED.items():
        assert {sig[0] for sig in npu.get(op, set())} == dtypes, op
        missing = {sig[0] for sig in cpu[op] - npu.get(op, set())}
        # Every CPU signature the npu lacks is declared with its dtype and a reason naming the aclnn op.
        assert missing == set(declared[op]["dtypes"] if op in declared else []), op
        if op in declared:
            assert declared[op]["reason"].startswith("aclnn") and "Atlas A2" in declared[op]["reason"], op
    assert len(npu["cast"]) == 100  # every dtype to every dtype


# The double's raw aclnn ops, called through ctypes on its own memory and stream, on the inputs where CANN's
# documented behaviour is not chipdock's.
RAW_OPS = r"""
import ctypes, json, os
import numpy as np, chipdock_npu
d = chipdock_npu.test_double_dir()
acl = ctypes.CDLL(os.path.join(d, "libascendcl.so"), mode=ctypes.RTLD_GLOBAL)
nnop = ctypes.CDLL(os.path.join(d, "libnnopbase.so"), mode=ctypes.RTLD_GLOBAL)
ops = ctypes.CDLL(os.path.join(d, "libopapi.so"))
P, I64, U64, I32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_int32
acl.aclGetRecentErrMsg.restype = ctypes.c_char_p
acl.aclrtMalloc.argtypes = [ctypes.POINTER(P), ctypes.c_size_t, I32]
acl.aclrtMemcpy.argtypes = [P, ctypes.c_size_t, P, ctypes.c_size_t, I32]
acl.aclrtSynchronizeStream.argtypes = [P]
nnop.aclCreateTensor.restype = P
nnop.aclCreateTensor.argtypes = [ctypes.POINTER(I64), U64, I32, ctypes.POINTER(I64), I64, I32, ctypes.POINTER(I64),
                                 U64, P]
nnop.aclCreateScalar.restype = P
nnop.aclCreateScalar.argtypes = [P, I32]
ACL = {"float32": 0, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "float64": 11, "bool": 12}
H2D, D2H, ND = 1, 2, 2
assert acl.aclInit(None) == 0 and acl.aclrtSetDevice(0) == 0
stream = P()
assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0

def arr(values):
    return (I64 * max(len(values), 1))(*values)

def device(a):
    ptr = P()
    assert acl.aclrtMalloc(ctypes.byref(ptr), max(a.nbytes, 1), 0) == 0
    assert acl.aclrtMemcpy(ptr, a.nbytes, a.ctypes.data, a.nbytes, H2D) == 0
    return ptr

def tensor(a, dtype, shape=None, strides=None):
    # `a` (contiguous) on the device, seen with `shape`/`strides` (elements); returns (handle, pointer)
    ptr = device(a)
    shape = list(a.shape) if shape is None else shape
    if strides is None:
        strides, step = [], 1
        for s in reversed(shape):
            strides.insert(0, step)
            step *= s
    h = nnop.aclCreateTensor(arr(shape), len(shape), ACL[dtype], arr(strides), 0, ND, arr([a.size]), 1, ptr)
    return P(h), ptr

def scalar(value, dtype):
    box = np.array([value], dtype={"float32": np.float32, "float64": np.float64, "int32": np.int32}[dtype])
    return P(nnop.aclCreateScalar(box.ctypes.data, ACL[dtype])), box

def run(name, *args):
    size, executor = U64(0), P()
    status = getattr(ops, f"aclnn{name}GetWorkspaceSize")(*args, ctypes.byref(size), ctypes.byref(executor))
    if status:
        return {"status": status, "message": (acl.aclGetRecentErrMsg() or b"").decode()}
    workspace = P()
    if size.value:
        acl.aclrtMalloc(ctypes.byref(workspace), size.value, 0)
    assert getattr(ops, f"aclnn{name}")(workspace, size, executor, stream) == 0
    assert acl.aclrtSynchronizeStream(stream) == 0
    return {"status": 0}

def download(ptr, like):
    host = np.empty_like(like)
    assert acl.aclrtMemcpy(host.ctypes.data, host.nbytes, ptr, host.nbytes, D2H) == 0
    return host.tolist()

def unary(name, x, dtype, out_dtype=None, *extra):
    out_dtype = out_dtype or dtype
    np_out = np.dtype(out_dtype)
    xt, _ = tensor(x, dtype)
    ot, optr = tensor(np.zeros(x.shape, np_out), out_dtype)
    r = run(name, xt, *extra, ot)
    return [str(v) for v in download(optr, np.zeros(x.shape, np_out))] if r["status"] == 0 else r

ninf = np.array([-np.inf, -1.0], np.float32)
lo, hi = scalar(2.0, "float32")[0], scalar(1.0, "float32")[0]
slope_double = scalar(0.5, "float64")[0]
bool_t, _ = tensor(np.array([[1, 0], [0, 1]], np.bool_), "bool", [2, 2], [1, 2])  # a transposed view
out_t, _ = tensor(np.zeros((2, 2), np.int32), "int32")
print(json.dumps({
    "silu": unary("Silu", ninf, "float32"),
    "gelu_erf": unary("GeluV2", ninf, "float32", None, I64(0)),
    "gelu_tanh": unary("Gelu", ninf, "float32"),
    "clamp_min_above_max": unary("Clamp", np.array([0.0, 5.0], np.float32), "float32", None, lo, hi),
    "cast_int32_int8": unary("Cast", np.array([3000, -3000, 300], np.int32), "int32", "int8", I32(ACL["int8"])),
    "cast_float64_uint8": unary("Cast", np.array([-0.5, 2.7], np.float64), "float64", "uint8", I32(ACL["uint8"])),
    "cast_strided_bool": run("Cast", bool_t, I32(ACL["int32"]), out_t),
    "neg_int16": unary("Neg", np.array([1, 2], np.int16), "int16", None),
    "leaky_relu_double_slope": unary("LeakyRelu", ninf, "float32", None, slope_double),
}))
"""


def test_the_doubles_aclnn_ops_do_what_canns_docs_say(run_fresh, npu_double_env):
    """The double takes CANN's documented formulas and limits literally: what the backend has to work around."""
    got = _last_json(run_fresh(RAW_OPS, npu_double_env))
    assert got["silu"][0] == "nan" and got["gelu_erf"][0] == "nan" and got["gelu_tanh"][0] == "nan"  # at -inf
    assert got["clamp_min_above_max"] == ["2.0", "2.0"]  # max(min(x, 1), 2): min everywhere
    assert got["cast_int32_int8"] == ["127", "-128", "44"]  # outside (-2048, 1920) not wrapped; 300 inside is
    assert got["cast_float64_uint8"] == ["255", "2"]  # "exact only for non-negative inputs"
    for name, words in {"cast_strided_bool": "contiguous", "neg_int16": "INT16",
                        "leaky_relu_double_slope": "FLOAT only"}.items():
        assert got[name]["status"] == 161002, name
        assert words in got[name]["message"], (name, got[name]["message"])


def test_chipdocks_ops_give_chipdocks_answers_where_aclnn_differs(run_fresh, npu_double_env):
    got = _last_json(run_fresh(
        """
        import json, numpy as np, chipdock
        ops, dev = chipdock.ops, "npu:0"
        def t(values, dtype):
            return chipdock.tensor(np.array(values), device=dev, dtype=dtype)
        def show(x):
            return [str(v) for v in x.numpy().tolist()]
        x = t([-np.inf, -1.0, np.inf], "float32")
        b = chipdock.tensor(np.array([[True, False], [False, False]]), device=dev)
        print(json.dumps({
            "silu": show(ops.silu(x)),
            "gelu_none": show(ops.gelu(x, approximate="none")),
            "gelu_tanh": show(ops.gelu(x, approximate="tanh")),
            "clip_min_above_max": show(ops.clip(t([0.0, 5.0], "float32"), min=2.0, max=1.0)),
            "clip_int_bounds": show(ops.clip(t([-100, 0, 100], "int8"), min=-1000.0, max=2.9)),
            "cast_int32_int8": show(ops.cast(t([3000, -3000, 300, 127], "int32"), to="int8")),
            "cast_float64_uint8": show(ops.cast(t([-0.5, 2.7, 255.9], "float64"), to="uint8")),
            "cast_strided_bool": ops.cast(b.T, to="int32").numpy().tolist(),
            "int_div": show(ops.div(t([7, -7, 5, -2147483648], "int32"), t([2, 2, 0, -1], "int32"))),
        }))
        """,
        npu_double_env,
    ))
    assert got["silu"] == ["-0.0", "-0.2689414322376251", "inf"]  # the limit at -inf, not NaN
    assert got["gelu_none"][0] == "-0.0" and got["gelu_tanh"][0] == "-0.0"
    assert got["gelu_none"][2] == "inf" and got["gelu_tanh"][2] == "inf"
    assert got["clip_min_above_max"] == ["1.0", "1.0"]  # chipdock (NumPy, PyTorch): max everywhere
    assert got["clip_int_bounds"] == ["-100", "0", "2"]  # bounds truncated toward zero, saturated to int8
    assert got["cast_int32_int8"] == ["-72", "72", "44", "127"]  # wrapped modulo 256
    assert got["cast_float64_uint8"] == ["0", "2", "255"]  # truncated toward zero
    assert got["cast_strided_bool"] == [[1, 0], [0, 0]]
    assert got["int_div"] == ["3", "-3", "0", "-2147483648"]  # toward zero; x / 0 is 0; MIN / -1 wraps


@pytest.mark.parametrize(
    "failing, op, survivor",
    [
        # The last step of a composed kernel: planned (and refused) before the first step is launched.
        ("aclnnInplaceMaskedFillScalar", "silu", "exp"),
        ("aclnnSWhere", "div_int", "div_float"),
        ("aclnnBitwiseAndScalar", "cast_int32_int8", "cast_int32_int16"),
        ("aclnnExp", "exp", "silu"),
    ],
)
def test_a_failing_aclnn_call_names_the_call_and_the_other_ops_still_run(run_fresh, npu_double_env, failing, op,
                                                                         survivor):
    got = _last_json(run_fresh(
        f"""
        import json, numpy as np, chipdock
        ops, dev = chipdock.ops, "npu:0"
        f = chipdock.tensor(np.array([1.0, -2.0, 0.5], np.float32), device=dev)
        i = chipdock.tensor(np.array([7, -7, 3], np.int32), device=dev)
        calls = {{
            "silu": lambda: ops.silu(f), "exp": lambda: ops.exp(f),
            "div_int": lambda: ops.div(i, i), "div_float": lambda: ops.div(f, f),
            "cast_int32_int8": lambda: ops.cast(i, to="int8"), "cast_int32_int16": lambda: ops.cast(i, to="int16"),
        }}
        out = {{}}
        try:
            calls["{op}"]()
            out["error"] = None
        except chipdock.ChipdockError as exc:
            out["error"] = f"{{type(exc).__name__}}: {{exc}}"
        chipdock.synchronize(dev)  # nothing of the failed kernel was enqueued: the stream is clean
        out["survivor"] = calls["{survivor}"]().numpy().tolist()
        print(json.dumps(out))
        """,
        {**npu_double_env, "CHIPDOCK_NPU_SIM_FAIL_OP": failing},
    ))
    error = got["error"]
    assert error is not None, f"{op} ran although {failing} fails"
    assert "npu" in error and op.split("_")[0] in error and f"{failing}GetWorkspaceSize" in error and "561000" in error
    assert got["survivor"]
