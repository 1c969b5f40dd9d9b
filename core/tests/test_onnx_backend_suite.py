"""ONNX's own backend test suite through chipdock.onnx.backend on the CPU device.

The cases come from the installed onnx wheel: the node cases are built in
memory (onnx.backend.test.loader.load_node_model_tests()), the `simple`,
`pytorch-operator` and `pytorch-converted` cases and the 9 `light` models
(kind `real`, whose data.json points at onnx/backend/test/data/light) are
read from the wheel's data directory. Every case not excluded below must pass;
EXCLUDED says why each excluded group cannot run on the opset.
"""

from __future__ import annotations

import os
import re
import tempfile

import pytest

pytest.importorskip("onnx")

import onnx.backend.test  # noqa: E402

from chipdock.onnx.backend import ChipdockBackend  # noqa: E402

# The light models' runner writes their dummy input and expected output under
# $ONNX_HOME/models/light; keep that out of the home directory.
os.environ.setdefault("ONNX_HOME", os.path.join(tempfile.gettempdir(), "chipdock-onnx-home"))


class CpuBackend(ChipdockBackend):
    """The adapter restricted to the CPU device (the suite adds a _cuda twin of every case)."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU")


# (pattern on the test name, reason): every case these match is skipped. Patterns
# are anchored on the op's test prefix; the module's last test checks that no
# pattern is stale and that the number of cases that run stays above a floor.
EXCLUDED: list[tuple[str, str]] = [
    # -- ops outside the opset (no chipdock op, no exact decomposition)
    (r"^test_(acos|asin|atan)(_example)?_", "inverse trig ops are outside the opset (and no accurate composition "
     "of its ops: no atan)"),
    (r"^test_(bitshift|bitwise|bitcast)_", "bit manipulation is outside the opset"),
    (r"^test_mod_(float|mixed_sign_float)", "floating-point Mod has no exact form in the opset"),
    (r"^test_(det|cumprod|dft|stft|melweightmatrix|col2im|nonzero|unique|compress|"
     r"tensorscatter)(?!.*_expanded)", "op outside the opset"),
    (r"^test_lppool_(3d|2d_dilations|2d_same)", "3-d, dilated and SAME-padded LpPool are outside the opset"),
    (r"^test_(gridsample|roialign|nonmaxsuppression|deform_conv|basic_deform_conv|image_decoder)_",
     "vision op outside the opset (its function body, where any, needs If/Loop or ops outside the opset)"),
    (r"^test_(qlinear|convinteger|matmulinteger)", "quantized GEMM and convolution are outside the opset"),
    (r"^test_(de)?quantizelinear_(e4m3fn|e5m2|float4e2m1|int16|uint16|int4|uint4|int2|uint2|blocked_symmetric)",
     "QuantizeLinear and DequantizeLinear of float8/float4/int16/uint16/int4/int2 (types outside the opset; "
     "blocked_symmetric quantizes to int16)"),
    (r"^test_(if|loop|scan)\d*(_|$)", "control flow (subgraphs) is outside the opset"),
    (r"^test_range_.*_expanded_", "Range's function body uses Loop and Ceil, outside the opset (Range itself runs)"),
    (r"^test_affine_grid_.*_expanded_", "AffineGrid's expanded body uses If, outside the opset (AffineGrid itself "
     "runs)"),
    (r"^test_linear_attention_", "LinearAttention's function body uses Scan, outside the opset"),
    (r"^test_flexattention(?!.*_expanded)", "FlexAttention is in the ai.onnx.preview domain, outside the opset"),
    (r"^test_ai_onnx_ml_", "the ai.onnx.ml domain is outside the opset"),
    # -- types outside the opset
    (r"^test_(sequence_|split_to_sequence|identity_sequence|optional_|identity_opt|if_seq|if_opt|loop1[36]_seq)",
     "sequence and optional types are outside the opset"),
    (r"^test_(string|strnorm|regex_full_match|tfidfvectorizer|equal_string)", "string types are outside the opset"),
    (r"^test_[a-z_]+_uint(16|32|64)(_expanded)?_cpu$", "uint16/uint32/uint64 are outside the opset"),
    (r"^test_(top_k_uint64|pow_types_float32_uint(32|64))_", "uint32/uint64 are outside the opset"),
    (r"^test_cast(like)?_.*(FLOAT8|FLOAT4|INT4|INT2|UINT4|UINT2|E8M0)",
     "float8/float4/int4/int2 types are outside the opset"),
    (r"^test_pow_types_int(32|64)_", "pow with an integer base is outside the opset (pow takes float types)"),
    # -- attribute values and modes outside the opset
    (r"^test_convtranspose_3d", "3-d ConvTranspose is outside the opset (Conv and pools run 3-d on 2-d ops)"),
    (r"^test_maxpool_with_argmax_", "MaxPool's Indices output is outside the opset"),
    (r"^test_resize_downsample_scales_(linear|cubic)_align_corners_cpu$", "the expected output reads "
     "align_corners' length_resized as scale x length (1.2 here); chipdock, onnxruntime and PyTorch take the "
     "output's length (1), as the spec defines it: onnxruntime gives [1, 4] where the case expects [1, 3.14]"),
    (r"^test_averagepool_[23]d_dilations_", "dilated AveragePool is outside the opset"),
    (r"^test_averagepool_2d_pads_cpu$", "pads beyond half the window with count_include_pad=0 are outside the opset"),
    # -- random and training-mode ops
    (r"^test_(bernoulli|training_dropout(_default)?(_mask)?_cpu$|random)", "random ops are outside the opset"),
    (r"^test_(adagrad|adam|momentum|nesterov_momentum|gradient_of)", "training ops (ai.onnx.preview.training) are "
     "outside the opset"),
    (r"^test_batchnorm_.*_training_mode_",
     "training-mode BatchNormalization (running statistics) is outside the opset"),
    # -- precision
    (r"^test_attention_4d_causal_fp16(_expanded)?_cpu$", "float16 attention rounds its intermediates to float16: "
     "1.2e-3 relative error against the suite's rtol 1e-3"),
]

# Cases that must run (and pass) on the CPU device: the count measured when the
# table was written, less a small margin so that adding cases to onnx does not
# break the floor while losing converters does.
RUN_FLOOR = 1455

backend_test = onnx.backend.test.BackendTest(CpuBackend, __name__)
for pattern, _reason in EXCLUDED:
    backend_test.exclude(pattern)

globals().update(backend_test.test_cases)


def _cpu_cases() -> list[str]:
    return sorted(name for case in backend_test.test_cases.values() for name in dir(case)
                  if name.startswith("test_") and name.endswith("_cpu"))


def test_exclusions_are_current_and_enough_cases_run():
    names = _cpu_cases()
    patterns = [re.compile(p) for p, _ in EXCLUDED]
    stale = [p.pattern for p in patterns if not any(p.search(n) for n in names)]
    assert not stale, f"exclusions matching no case: {stale}"
    run = [n for n in names if not any(p.search(n) for p in patterns)]
    light = {"test_bvlc_alexnet_cpu", "test_densenet121_cpu", "test_inception_v1_cpu", "test_inception_v2_cpu",
             "test_resnet50_cpu", "test_shufflenet_cpu", "test_squeezenet_cpu", "test_vgg19_cpu",
             "test_zfnet512_cpu"}
    assert light <= set(run), f"light models excluded: {sorted(light - set(run))}"
    print(f"\nONNX backend suite on cpu: {len(run)} cases run, {len(names) - len(run)} excluded "
          f"({len(EXCLUDED)} patterns), of {len(names)}")
    assert len(run) >= RUN_FLOOR


def test_adapter_run_node_and_devices():
    import numpy as np
    from onnx import helper

    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=2.0)
    a, b, c = (np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((4, 3), np.float32), np.ones(4, np.float32))
    (y,) = ChipdockBackend.run_node(node, [a, b, c], device="CPU")
    np.testing.assert_allclose(y, 2.0 * a @ b.T + c)
    assert ChipdockBackend.supports_device("CPU")
    assert not ChipdockBackend.supports_device("NOSUCHDEVICE")
