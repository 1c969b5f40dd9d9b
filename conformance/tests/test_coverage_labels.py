"""Which manifest ``unsupported`` entry covers a kernel signature (device_api/docs/manifest.md, "Matching")."""

from __future__ import annotations

from chipdock_conformance import coverage

F32, F16, BOOL = 1, 2, 10
WHERE_F32 = (BOOL, F32, F32, F32)  # where(cond, a, b) -> out: label "bool-float32"


def entry(dtypes: list[str], op: str = "where", reason: str = "r") -> dict[str, object]:
    return {"op": op, "dtypes": dtypes, "reason": reason}


def test_a_coverage_label_matches_exactly_its_signature():
    assert coverage._label(WHERE_F32) == "bool-float32"
    assert coverage.entry_matches(entry(["bool-float32"]), "where", WHERE_F32)
    assert not coverage.entry_matches(entry(["bool-float16"]), "where", WHERE_F32)
    assert not coverage.entry_matches(entry(["float32-bool"]), "where", WHERE_F32)  # order is the signature's


def test_a_plain_dtype_name_matches_every_signature_that_uses_it():
    assert coverage.entry_matches(entry(["float32"]), "where", WHERE_F32)
    assert coverage.entry_matches(entry(["bool"]), "where", WHERE_F32)
    assert not coverage.entry_matches(entry(["float16"]), "where", WHERE_F32)
    assert coverage.entry_matches(entry([]), "where", (BOOL, F16, F16, F16))  # no dtypes: every signature
    assert not coverage.entry_matches(entry([], op="add"), "where", WHERE_F32)


def test_the_first_matching_entry_gives_the_reason():
    entries = [entry(["bool-float16"], reason="a"), entry(["float32"], reason="b"), entry([], reason="c")]
    assert coverage._declared_reason(entries, "where", WHERE_F32) == "b"
    assert coverage._declared_reason(entries, "where", (BOOL, F16, F16, F16)) == "a"
    assert coverage._declared_reason(entries, "add", (F32, F32, F32)) is None
