"""The quick suite as the mutation score chose it (chipdock_conformance.quick_selection)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chipdock_conformance import quick_selection as Q
from chipdock_conformance.case import Context


def test_variant_drops_only_the_dtype_part() -> None:
    assert Q.variant_of("ops/add/float32/specials") == "ops/add/*/specials"
    assert Q.variant_of("ops/cast/float32-int8/values") == "ops/cast/*/values"
    assert Q.variant_of("runtime/memory/copy[size=4097]") == "runtime/memory/copy[size=4097]"


def _selection(tmp_path: Path, **data: object) -> Path:
    path = tmp_path / "selection.json"
    path.write_text(json.dumps(data))
    Q._load.cache_clear()
    return path


def test_selected_pinned_untested_and_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(Q.ENV_VAR, raising=False)
    path = _selection(tmp_path, variants=["ops/add/*/specials"], pinned={"runtime/x": "a planted bug needs it"},
                      tested=["ops/add/*/specials", "ops/add/*/odd", "runtime/x"])
    assert Q.is_quick("ops/add/float16/specials", False, path)  # selected, whatever the suite marked
    assert Q.is_quick("runtime/x", False, path)  # pinned
    assert not Q.is_quick("ops/add/float32/odd", True, path)  # considered and not chosen
    assert Q.is_quick("ops/add/float32/new_variant", True, path)  # never considered: the suite's flag
    assert not Q.is_quick("ops/add/float32/new_variant", False, path)
    monkeypatch.setenv(Q.ENV_VAR, "marked")
    assert Q.is_quick("ops/add/float32/odd", True, path)
    assert not Q.is_quick("ops/add/float16/specials", False, path)


def test_no_file_keeps_the_marks(tmp_path: Path) -> None:
    Q._load.cache_clear()
    assert Q.is_quick("ops/add/float32/odd", True, tmp_path / "absent.json")
    assert not Q.is_quick("ops/add/float32/odd", False, tmp_path / "absent.json")


@pytest.mark.skipif(not Q.SELECTION_PATH.is_file(), reason="no quick_selection.json shipped")
def test_shipped_selection_names_only_variants_the_suites_have() -> None:
    """A selection naming a variant the suites no longer make is stale: regenerate it."""
    import chipdock_conformance.precision as P
    import chipdock_conformance.runtime as R

    ctx = Context(device="cpu:0", level="full")
    have = {Q.variant_of(c.id) for c in [*P.collect(ctx), *R.collect(ctx)]}
    data = json.loads(Q.SELECTION_PATH.read_text())
    named = set(data["variants"]) | set(data.get("pinned", {}))
    assert named <= have, sorted(named - have)[:20]
    assert all(reason.strip() for reason in data.get("pinned", {}).values())


def test_the_quick_suite_touches_every_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """However the selection falls, a quick run reaches every op of the spec on the CPU reference."""
    import chipdock_conformance.precision as P

    monkeypatch.delenv(Q.ENV_VAR, raising=False)
    Q._load.cache_clear()
    quick = P.collect(Context(device="cpu:0", level="quick"))
    assert {c.op for c in quick} == set(P._spec()["ops"])
