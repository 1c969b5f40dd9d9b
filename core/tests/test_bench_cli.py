import json
import os
import subprocess
import sys


def test_bench_ops_quick_writes_a_table_and_json(tmp_path):
    out = tmp_path / "ops.json"
    proc = subprocess.run(
        [sys.executable, "-m", "chipdock.cli", "bench", "ops", "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "CHIPDOCK_FALLBACK": "allow"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "dispatch overhead" in proc.stdout and "vs torch" in proc.stdout
    report = json.loads(out.read_text())
    names = [c["name"] for c in report["cases"]]
    assert any(n.startswith("matmul") for n in names) and any(n.startswith("add f32") for n in names)
    for case in report["cases"]:
        assert case["unit"] in ("us/op", "GB/s", "GFLOP/s")
        assert case["ours"] is not None or case["notes"], case  # measured, or says why not
