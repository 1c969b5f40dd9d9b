"""Overflow-checked shapes, sizes and attribute ranges (issue 21, items 1 and 3).

Every call here used to crash, wrap into a wrong shape or fail late; each is
now an error at the call naming the op (or API call), the argument and the
reason. The repros run in one child process first, so a crash (the tile
SIGSEGV) fails these tests instead of killing pytest.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import chipdock
from chipdock import ops

# name -> (source of one expression, exception class name, regex of its message)
REPROS: dict[str, tuple[str, str, str]] = {
    "tile": ("ops.tile(chipdock.tensor([1.0, 2.0, 3.0, 4.0]), repeats=[2**62 + 1])",
             "InvalidArgumentError", r"^\[core\] tile: repeats: .*4 \* 4611686018427387905 overflows int64$"),
    "tile_to_2_63": ("ops.tile(chipdock.tensor([1.0, 2.0, 3.0, 4.0]), repeats=[2**61])",
                     "InvalidArgumentError", r"^\[core\] tile: repeats: .*overflows int64$"),
    "pad": ("ops.pad(chipdock.tensor([1., 2., 3.]), pads=[2**63 - 1, 2**63 - 1])",
            "InvalidArgumentError", r"^\[core\] pad: pads: .*overflows int64$"),
    "conv2d_dilation": ("ops.conv2d(x4, w3, dilation=[2**63 - 2, 1])",
                        "InvalidArgumentError", r"^\[core\] conv2d: dilation: .*overflows int64$"),
    "conv2d_kernel_too_big": ("ops.conv2d(x4, w3, dilation=[2, 1])",
                              "InvalidArgumentError", r"^\[core\] conv2d: x: the kernel does not fit: it spans 5 "),
    "conv_transpose2d_stride": ("ops.conv_transpose2d(x4, w3, stride=[2**62, 1])",
                                "InvalidArgumentError", r"^\[core\] conv_transpose2d: stride: .*overflows int64$"),
    "max_pool2d_dilation": ("ops.max_pool2d(x4, kernel=[3, 3], dilation=[2**63 - 2, 1])",
                            "InvalidArgumentError", r"^\[core\] max_pool2d: dilation: .*overflows int64$"),
    "max_pool2d_2_62_kernel": ("ops.max_pool2d(x4, kernel=[2**62, 2**62])",
                               "InvalidArgumentError", r"^\[core\] max_pool2d: kernel: does not fit the input"),
    "max_pool2d_2_62_kernel_padded": ("ops.max_pool2d(x4, kernel=[2**62, 2**62], padding=[2**61] * 4)",
                                      "InvalidArgumentError", r"^\[core\] max_pool2d: kernel: .*overflows int64$"),
    "local_response_norm": ("ops.local_response_norm(x4, size=2**63 - 1)",
                            "InvalidArgumentError", r"^\[core\] local_response_norm: size: .*overflows int64$"),
    "as_strided": ("chipdock.tensor([1., 2.]).as_strided((2**62 + 1,), (4,), 0)",
                   "OutOfRangeError", r"^\[core\] as_strided: .* reach bytes beyond the int64 range$"),
    "as_strided_offset": ("chipdock.tensor([1., 2.]).as_strided((), (), 2**62 + 1)",
                          "OutOfRangeError", r"^\[core\] as_strided: "),
    "as_strided_square": ("chipdock.tensor([1., 2.]).as_strided((4, 4), (2**63 - 2, 2**63 - 2), 0)",
                          "OutOfRangeError", r"^\[core\] as_strided: .*beyond the int64 range$"),
    "as_strided_2_31": ("chipdock.tensor([1., 2.]).as_strided((2**31,), (2**31,), 1)",
                        "OutOfRangeError", r"^\[core\] as_strided: "),
    "empty": ("chipdock.empty((2**61 + 1,), chipdock.float64)",
              "InvalidArgumentError",
              r"^\[core\] empty: shape \(2305843009213693953,\) of float64 takes more than 2\^63 bytes$"),
    "empty_strides": ("chipdock.empty((2**62, 0, 4), chipdock.float32)",
                      "InvalidArgumentError", r"^\[core\] empty: .*more than 2\^63 elements$"),
    "gather_int64_min": ("ops.gather(chipdock.tensor([1., 2., 3., 4.]), chipdock.tensor(np.array([-2**63], np.int64)))",
                         "OutOfRangeError",
                         r"^\[cpu\] gather: indices: index -9223372036854775808 is out of range for axis 0 of size 4$"),
    "resize_scale": ("ops.resize(x4, scales=[1e300, 1.0])",
                     "InvalidArgumentError", r"^\[core\] resize: scales: .*overflows int64$"),
    "resize_nan_scale": ("ops.resize(x4, scales=[float('nan'), 1.0])",
                         "InvalidArgumentError", r"^\[core\] resize: scales: "),
    "arange": ("ops.arange(limit=1e300, dtype='float32')",
               "InvalidArgumentError", r"^\[core\] arange: limit: .*overflows int64$"),
    "concat": ("ops.concat([huge, huge])",
               "InvalidArgumentError", r"^\[core\] concat: inputs: .*overflows int64$"),
    "split": ("ops.split(chipdock.tensor([1., 2.]), sizes=[2**62, 2**62, 2**62, 2**62, 2])",
              "InvalidArgumentError", r"^\[core\] split: sizes: .*overflows int64$"),
    "reshape": ("ops.reshape(chipdock.tensor([1., 2., 3., 4.]), shape=[2**62, 4])",
                "InvalidArgumentError", r"^\[core\] reshape: shape: .*overflows int64$"),
    "full": ("ops.full(shape=[2**62, 4])",
             "InvalidArgumentError", r"^\[core\] full: shape: .*more than 2\^63 elements$"),
    # F13 addendum: a broadcast view is counted whole (NumPy refuses arrays above 2^63 bytes).
    "broadcast_view_bytes": ("ops.expand(chipdock.tensor([1.0]), shape=[2**61 + 1])",
                             "InvalidArgumentError", r"^\[core\] expand: shape \(2305843009213693953,\) of float32 "
                                                     r"takes more than 2\^63 bytes$"),
    "broadcast_view_bytes_2d": ("ops.expand(chipdock.tensor(np.zeros((1, 1), np.float32)), shape=[2**31, 2**31 - 1])",
                                "InvalidArgumentError",
                                r"^\[core\] expand: shape \(2147483648, 2147483647\) of float32 "
                                r"takes more than 2\^63 bytes$"),
    "as_strided_bytes": ("chipdock.tensor([1.0]).as_strided((2**62,), (0,), 0)",
                         "InvalidArgumentError", r"^\[core\] as_strided: shape .* takes more than 2\^63 bytes$"),
    "split_num": ("ops.split(chipdock.tensor(np.zeros((0,), np.float32)), num=2**40)",
                  "InvalidArgumentError", r"^\[core\] split: num: 1099511627776 pieces for dim 0 of size 0"),
    "split_num_vector_max": ("ops.split(chipdock.tensor(np.zeros((0,), np.float32)), num=2**62)",
                             "InvalidArgumentError", r"^\[core\] split: num: 4611686018427387904 pieces"),
    "arange_tiny_delta": ("ops.arange(start=1.0, limit=3.62, delta=1e-300)",
                          "InvalidArgumentError", r"^\[core\] arange: limit: \(limit - start\) / delta = 2\.62e\+300 "
                                                  r"elements overflows int64$"),
    "matmul_output": ("ops.matmul(ops.expand(one, shape=[2**60, 1]), ops.expand(one, shape=[1, 2**60]))",
                      "InvalidArgumentError", r"^\[core\] matmul: shape .* has more than 2\^63 elements$"),
}

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import chipdock
    from chipdock import ops
    x4 = chipdock.tensor(np.ones((1, 1, 4, 4), np.float32))
    w3 = chipdock.tensor(np.ones((1, 1, 3, 3), np.float32))
    one = chipdock.tensor([[1.0]])
    huge = ops.expand(chipdock.tensor(np.ones(1, np.int8)), shape=[2**62])  # a stride-0 view: no memory
    for name, source in json.loads(sys.argv[1]).items():
        try:
            eval(source)
            result = ["returned", ""]
        except Exception as e:
            result = [type(e).__name__, str(e)]
        print(json.dumps([name] + result), flush=True)
""")


@pytest.fixture(scope="module")
def repro_results() -> dict[str, tuple[str, str]]:
    sources = {name: source for name, (source, _, _) in REPROS.items()}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(sources)], capture_output=True, text=True,
                          timeout=120)
    results = {}
    for line in proc.stdout.splitlines():
        name, kind, message = json.loads(line)
        results[name] = (kind, message)
    if proc.returncode != 0:  # a crash: every repro not reached fails with the child's end
        for name in REPROS:
            results.setdefault(name, ("died", f"child exited {proc.returncode}: {proc.stderr[-2000:]}"))
    return results


@pytest.mark.parametrize("name", list(REPROS))
def test_repro_is_an_error_at_the_call(name, repro_results):
    _, kind, pattern = REPROS[name]
    got_kind, message = repro_results[name]
    assert got_kind == kind, f"{name}: {got_kind}: {message}"
    assert __import__("re").search(pattern, message), message


# --- attribute ranges from the spec ------------------------------------------------------


def x4() -> chipdock.Tensor:
    return chipdock.tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: ops.conv2d(x4(), x4()[:, :, :3, :3], dilation=[0, 1]),
     r"conv2d: dilation: entry 0: 0 is below the minimum 1"),
    (lambda: ops.conv2d(x4(), x4()[:, :, :3, :3], stride=[1, -1]),
     r"conv2d: stride: entry 1: -1 is below the minimum 1"),
    (lambda: ops.max_pool2d(x4(), kernel=[0, 2]), r"max_pool2d: kernel: entry 0: 0 is below the minimum 1"),
    (lambda: ops.max_pool2d(x4(), kernel=[2, 2], padding=[-1, 0, 0, 0]), r"max_pool2d: padding: entry 0: -1 is below"),
    (lambda: ops.max_pool2d(x4(), kernel=[2, 2], padding=[2, 0, 0, 0]), r"max_pool2d: padding: must be at most half"),
    (lambda: ops.local_response_norm(x4(), size=0), r"local_response_norm: size: 0 is below the minimum 1"),
    (lambda: ops.tile(x4(), repeats=[1, 1, -2, 1]), r"tile: repeats: entry 2: -2 is below the minimum 0"),
    (lambda: ops.pad(x4(), pads=[0] * 7 + [-1]), r"pad: pads: entry 7: -1 is below the minimum 0"),
    (lambda: ops.full(shape=[-3]), r"full: shape: -3 is below the minimum 0"),
    (lambda: ops.group_norm(x4(), x4()[0, 0, 0, :1], x4()[0, 0, 0, :1], num_groups=-2**63),
     r"group_norm: num_groups: -9223372036854775808 is below the minimum 1"),
    (lambda: ops.layer_norm(x4(), x4()[0, 0, 0], epsilon=float("nan")), r"layer_norm: epsilon: NaN is not allowed"),
    (lambda: ops.clip(x4(), min=0.5, max=float("nan")), r"clip: max: NaN is not allowed"),
    (lambda: ops.topk(chipdock.tensor(np.array(3, np.int8)), k=0, axis=0), r"topk: k: 0 for a 0-d tensor"),
    (lambda: ops.local_response_norm(x4(), size=5, bias=-float("inf")), r"local_response_norm: bias: must be finite"),
    (lambda: ops.leaky_relu(x4(), alpha=float("inf")), r"leaky_relu: alpha: must be finite, got inf"),
    # finite also means within float32's range, where a kernel may compute with it (1e300 would be inf)
    (lambda: ops.scaled_dot_product_attention(x4(), x4(), x4(), scale=1e300),
     r"scaled_dot_product_attention: scale: 1e\+300 is beyond float32's range"),
    (lambda: ops.local_response_norm(x4(), size=2, beta=-1e39), r"local_response_norm: beta: -1e\+39 is beyond"),
    (lambda: ops.local_response_norm(x4(), size=2, bias=-1.0), r"local_response_norm: bias: -1 is below the minimum 0"),
    # the kernel's own check never runs for an empty output: the rule checks it for every shape
    (lambda: ops.full(shape=[0], value=1e300, dtype="int16"), r"full: value: 1e\+300 does not fit int16"),
    (lambda: ops.full(shape=[0, 3], value=float("inf"), dtype="int64"), r"full: value: inf does not fit int64"),
    (lambda: ops.full(shape=[2], value=-1.0, dtype="uint8"), r"full: value: -1 does not fit uint8"),
    (lambda: ops.local_response_norm(chipdock.tensor([1.0, 2.0, 3.0]), size=3),
     r"local_response_norm: x: expected at least 2 dims"),
    (lambda: ops.local_response_norm(chipdock.tensor(np.zeros((0,), np.float32)), size=2),
     r"local_response_norm: x: expected at least 2 dims"),  # empty: no kernel runs, the rule still checks
    (lambda: ops.slice(chipdock.tensor(1.0), starts=[2**31 - 1], ends=[2**31 - 1]), r"slice: starts: a 0-d tensor"),
    (lambda: ops.transpose(x4(), perm=[1, -2, 1, 0]), r"transpose: perm: \(1, -2, 1, 0\) is not a permutation"),
    (lambda: ops.tile(chipdock.tensor(np.zeros((0, 1), np.float32)), repeats=[5, 2**62]),
     r"tile: shape \(0, 4611686018427387904\) of float32 takes more than 2\^63 bytes"),  # NumPy refuses it too
])
def test_attribute_out_of_range_is_refused_naming_op_and_attribute(call, message):
    with pytest.raises(chipdock.InvalidArgumentError, match=r"^\[core\] " + message):
        call()


def test_slice_steps_at_the_int64_limits():
    t = chipdock.tensor([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(ops.slice(t, starts=[0], ends=[4], steps=[2**63 - 1]).numpy(), [1.0])
    np.testing.assert_array_equal(ops.slice(t, starts=[3], ends=[-5], steps=[-(2**63)]).numpy(), [4.0])
    np.testing.assert_array_equal(ops.slice(t, starts=[3], ends=[-5], steps=[-3]).numpy(), [4.0, 1.0])
    np.testing.assert_array_equal(ops.slice(t, starts=[-2**63], ends=[2**63 - 1], steps=[3]).numpy(), [1.0, 4.0])


def test_expand_refuses_a_negative_dim():
    with pytest.raises(chipdock.InvalidArgumentError,
                       match=r"^\[core\] expand: shape: entry 0: -1 is below the minimum 0"):
        ops.expand(chipdock.tensor([1.0]), shape=[-1, 1])


@pytest.mark.parametrize(("shape", "target", "message"), [
    ((3,), [], r"shape: \(\) has fewer dims than x's shape \(3,\)"),  # F18: NumPy's broadcast_to refuses it
    ((4,), [3, 1], r"shape: x's shape \(4,\) does not expand to \(3, 1\) \(dim 0 of size 4 is not 1"),  # not two-way
    ((2, 3), [2, 1], r"shape: x's shape \(2, 3\) does not expand to \(2, 1\)"),
    ((2, 1), [3, 5], r"shape: x's shape \(2, 1\) does not expand to \(3, 5\) \(dim 0 of size 2"),
])
def test_expand_follows_numpy_broadcast_to(shape, target, message):
    x = chipdock.tensor(np.zeros(shape, np.float32))
    with pytest.raises(ValueError, match=r"NumPy|broadcast"):
        np.broadcast_to(np.zeros(shape), target)  # the rule it follows
    with pytest.raises(chipdock.InvalidArgumentError, match=r"^\[core\] expand: " + message):
        ops.expand(x, shape=target)
    assert x.numpy().shape == shape  # the input is untouched


@pytest.mark.parametrize(("shape", "target"), [
    ((1,), [0]), ((3,), [2, 3]), ((2, 1), [4, 2, 5]), ((), [2, 2]), ((0, 1), [3, 0, 2]), ((1, 1), [2**31, 2**30]),
])
def test_expand_accepts_what_broadcast_to_accepts(shape, target):
    a = np.arange(int(np.prod(shape)), dtype=np.int8).reshape(shape)
    got = ops.expand(chipdock.tensor(a), shape=target)
    assert got.shape == tuple(target)
    if np.prod(target) < 1000:
        np.testing.assert_array_equal(got.numpy(), np.broadcast_to(a, target))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: ops.embedding(chipdock.tensor(np.zeros((0, 0), np.uint8)), chipdock.tensor(np.array(0, np.int32))),
     r"embedding: indices: every index is out of range for axis 0 of size 0 of weight \(0, 0\) "
     r"\(indices has 1 elements\)"),
    (lambda: ops.embedding(chipdock.tensor(np.zeros((0, 3), np.float32)), chipdock.tensor(np.zeros((2, 1), np.int64))),
     r"embedding: indices: every index is out of range for axis 0 of size 0"),
    (lambda: ops.gather(chipdock.tensor(np.zeros((2, 0), np.float32)), chipdock.tensor(np.array([5], np.int64)),
                        axis=-1),
     r"gather: indices: every index is out of range for axis 1 of size 0 of data \(2, 0\)"),
    (lambda: ops.gather_elements(chipdock.tensor(np.zeros((0, 2), np.float32)),
                                 chipdock.tensor(np.zeros((1, 2), np.int64)), axis=0),
     r"gather_elements: indices: every index is out of range for axis 0 of size 0"),
    (lambda: ops.scatter(chipdock.tensor(np.zeros((2, 0), np.float32)), chipdock.tensor(np.zeros((2, 1), np.int64)),
                         chipdock.tensor(np.zeros((2, 1), np.float32)), axis=1),
     r"scatter: indices: every index is out of range for axis 1 of size 0"),
])
def test_an_index_into_an_empty_axis_is_refused_at_the_call(call, message):
    # F10: no index is in range, whatever its value; the shapes say so before any kernel (or none) runs.
    with pytest.raises(chipdock.OutOfRangeError, match=r"^\[core\] " + message):
        call()


@pytest.mark.parametrize(("call", "message"), [
    (lambda: ops.embedding(chipdock.tensor(np.zeros((1, 0), np.float16)),
                           chipdock.tensor(np.array([[0, 1]], np.int64))),
     r"embedding: indices: index 1 is out of range for axis 0 of size 1$"),
    (lambda: ops.embedding(chipdock.tensor(np.zeros((3, 0), np.float32)), chipdock.tensor(np.array(-4, np.int32))),
     r"embedding: indices: index -4 is out of range for axis 0 of size 3$"),
    (lambda: ops.gather(chipdock.tensor(np.zeros((2, 0), np.float32)), chipdock.tensor(np.array([2], np.int64))),
     r"gather: indices: index 2 is out of range for axis 0 of size 2$"),
])
def test_indices_are_checked_when_the_output_is_empty(call, message):
    # F10: no kernel runs for an empty output, so the core reads the indices itself.
    with pytest.raises(chipdock.OutOfRangeError, match=r"^\[core\] " + message):
        call()


def test_no_index_into_an_empty_axis_is_fine():
    empty = chipdock.tensor(np.zeros((0,), np.int64))
    assert ops.embedding(chipdock.tensor(np.zeros((0, 3), np.float32)), empty).shape == (0, 3)
    assert ops.gather(chipdock.tensor(np.zeros((2, 0), np.float32)), empty, axis=1).shape == (2, 0)
    # An empty axis that is not the indexed one: the kernel runs on real indices.
    got = ops.gather(chipdock.tensor(np.zeros((0, 2), np.float32)), chipdock.tensor(np.array([1], np.int64)), axis=1)
    assert got.shape == (0, 1)
    # In-range indices with an empty output: accepted (negatives count from the end).
    weight = chipdock.tensor(np.zeros((3, 0), np.float32))
    assert ops.embedding(weight, chipdock.tensor(np.array([[0, 2, -3]], np.int32))).shape == (1, 3, 0)


def test_split_of_an_empty_dim_is_one_piece_at_most():
    x = chipdock.tensor(np.zeros((0, 2), np.float32))
    assert [p.shape for p in ops.split(x, num=1)] == [(0, 2)]
    assert [p.shape for p in ops.split(x, axis=1, num=2)] == [(0, 1), (0, 1)]
    assert [p.shape for p in ops.split(x, sizes=[0, 0, 0])] == [(0, 2)] * 3  # explicit sizes say how many
    with pytest.raises(chipdock.InvalidArgumentError, match=r"^\[core\] split: num: 2 pieces for dim 0 of size 0 "
                                                            r"\(at most max\(size, 1\)\)"):
        ops.split(x, num=2)


def test_windows_at_the_edge_of_the_ranges_still_work():
    x = x4()
    # The dilated kernel exactly as large as the padded input: one output.
    assert ops.conv2d(x, x[:, :, :2, :2], dilation=[3, 3]).shape == (1, 1, 1, 1)
    np.testing.assert_array_equal(ops.max_pool2d(x, kernel=[4, 4]).numpy(), [[[[15.0]]]])
    np.testing.assert_array_equal(ops.max_pool2d(x, kernel=[2, 2], dilation=[3, 3]).numpy(), [[[[15.0]]]])
    # A window that is mostly padding (2^60 rows, 2^59 of padding on each side) visits only the input.
    # Every one of the 5 windows covers all 4 rows.
    got = ops.max_pool2d(x, kernel=[2**60, 1], padding=[2**59, 0, 2**59, 0], stride=[1, 1]).numpy()
    np.testing.assert_array_equal(got, np.tile(np.arange(12, 16, dtype=np.float32), (1, 1, 5, 1)))
    # Clip at an infinite bound is not NaN: allowed.
    np.testing.assert_array_equal(ops.clip(x, max=float("inf")).numpy(), x.numpy())


def test_output_out_of_memory_names_the_op_and_output():
    with pytest.raises(chipdock.OutOfMemoryError, match=r"^\[cpu\] full: output 'out' float32 \(1099511627776,\): "
                                                         r"memory_allocate: out of memory"):
        ops.full(shape=[2**40], device="cpu:0")


# --- views ---------------------------------------------------------------------------------


def test_empty_views_touch_no_bytes():
    t = chipdock.tensor(np.zeros((2, 0), np.float32))
    assert t.as_strided((1, 0), (1, 1), 1).shape == (1, 0)  # t[1:], NumPy's (1, 0)
    with pytest.raises(chipdock.OutOfRangeError, match=r"as_strided: the view touches bytes \[-4, -4\)"):
        t.as_strided((0,), (1,), -1)


def test_dlpack_import_refuses_a_span_past_int64():
    # The zero-copy import path (device memory; host memory is copied by from_dlpack), fed a NumPy capsule.
    cpu = chipdock.device("cpu:0")
    base = np.zeros(2, np.float32)
    bomb = np.lib.stride_tricks.as_strided(base, shape=(2**60,), strides=(32,))  # NumPy does not check the span
    with pytest.raises(chipdock.InvalidArgumentError, match=r"from_dlpack: shape \(1152921504606846976,\) with strides "
                                                            r"\(8,\) spans more than 2\^63 bytes"):
        chipdock._C.import_dlpack(bomb.__dlpack__(), cpu)
    # An ordinary strided view still imports, its layout kept.
    view = np.arange(12.0).reshape(3, 4)[:, ::-2]
    t = chipdock._C.import_dlpack(view.__dlpack__(), cpu)
    assert t.shape == (3, 2) and t.stride() == (4, -2)


# --- index values known at the call --------------------------------------------------------


@pytest.mark.parametrize(("call", "message"), [
    (lambda x: ops.gather(x, [0, -2**63]),
     r"gather: indices: index -9223372036854775808 is out of range for axis 0 of size 4"),
    (lambda x: ops.gather(x, np.array([[3, 3]], np.int32), axis=-1),
     r"gather: indices: index 3 is out of range for axis 1 of size 3"),
    (lambda x: ops.embedding(x, [4]), r"embedding: indices: index 4 is out of range for axis 0 of size 4"),
    (lambda x: ops.gather_elements(x, [[0, 1, -5]]), r"gather_elements: indices: index -5 is out of range for axis 0"),
    (lambda x: ops.scatter(x, np.array([[0, 0, 5]]), np.ones((1, 3)), axis=0),
     r"scatter: indices: index 5 is out of range"),
])
def test_host_indices_are_checked_at_the_call_even_on_a_busy_stream(call, message):
    # Python data is known before it becomes a tensor: the core checks it on
    # every device, whatever the stream is doing.
    x = chipdock.tensor(np.arange(12.0).reshape(4, 3))
    release = threading.Event()
    chipdock.current_stream().add_callback(lambda: release.wait(30))
    try:
        with pytest.raises(chipdock.OutOfRangeError, match=r"^\[core\] " + message):
            call(x)
    finally:
        release.set()
    chipdock.synchronize()  # nothing was enqueued: no asynchronous error follows
    np.testing.assert_array_equal(ops.gather(x, [3, -4]).numpy(), [[9.0, 10.0, 11.0], [0.0, 1.0, 2.0]])


def test_device_indices_on_a_busy_stream_fail_at_synchronize_naming_op_and_argument():
    x = chipdock.tensor(np.arange(12.0).reshape(4, 3))
    idx = chipdock.tensor(np.array([1, -2**63]))
    release = threading.Event()
    chipdock.current_stream().add_callback(lambda: release.wait(30))
    try:
        out = ops.gather(x, idx)  # queued behind the callback: the kernel checks when it runs
    finally:
        release.set()
    with pytest.raises(chipdock.OutOfRangeError, match=r"gather \(asynchronous\): indices: index -9223372036854775808 "
                                                       r"is out of range for axis 0 of size 4"):
        out.numpy()
        chipdock.synchronize()
    chipdock.synchronize()  # reported once


def test_host_indices_with_a_numpy_axis():
    x = chipdock.tensor(np.arange(12.0).reshape(4, 3))
    expected = r"^\[core\] gather: indices: index 3 is out of range for axis 1 of size 3$"
    with pytest.raises(chipdock.OutOfRangeError, match=expected):
        ops.gather(x, [3], axis=np.int64(1))
