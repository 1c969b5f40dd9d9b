"""Why chipdock refuses the ONNX ops it has no converter for (docs/models.md, "Which ONNX ops run").

The session names the reason in its UnsupportedModelError, instead of a bare "unknown op".
"""

from __future__ import annotations

_GROUPS: list[tuple[tuple[str, ...], str]] = [
    (("Acos", "Asin", "Atan"), "no inverse trig op in the opset, and no accurate composition of its ops (no atan)"),
    (("BitShift", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor"), "no bit operations in the opset"),
    (("If", "Loop", "Scan", "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
      "SequenceLength", "SplitToSequence", "ConcatFromSequence", "SequenceMap", "Optional", "OptionalGetElement",
      "OptionalHasElement"), "subgraphs (control flow), sequence and optional values are not planned yet"),
    (("ConvInteger", "MatMulInteger", "QLinearConv", "QLinearMatMul"),
     "quantized GEMM and convolution need opset ops (with their integer accumulation) that do not exist yet"),
    (("NonMaxSuppression", "RoiAlign", "MaxRoiPool", "GridSample", "DeformConv", "Col2Im"),
     "vision op with no opset op yet"),
    (("NonZero", "Compress", "Unique"), "its output is sized by the data: the plan has no op whose output shape "
     "depends on values"),
    (("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli"),
     "no random-number op in the opset"),
    (("DFT", "STFT", "MelWeightMatrix", "Det"), "no spectral or determinant op in the opset"),
    (("StringConcat", "StringNormalizer", "StringSplit", "RegexFullMatch", "TfIdfVectorizer", "ImageDecoder"),
     "string and image-decoding ops are outside a tensor opset"),
]

REFUSED: dict[str, str] = {op: reason for ops, reason in _GROUPS for op in ops}


def refusal(op_type: str) -> str:
    """Why an op without a converter (nor a function body that runs) is refused."""
    return REFUSED.get(op_type, "unknown op (no converter and no function body)")
