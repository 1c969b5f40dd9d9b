"""Collectives on HCCL on the simulated Ascend runtime: the npu plug-in's comm_* slots driven through ctypes on a
private copy of its table (chipdock_conformance.plugin_table), by ranks as threads of one process and as separate
processes (npu_collective_ranks.py, each run in fresh interpreters so the double reads this test's knobs)."""

from __future__ import annotations

import json
import threading
from functools import cache
from pathlib import Path

import pytest
from npu_collective_ranks import MATRIX

TESTS_DIR = Path(__file__).resolve().parent
MODES = [("threads", 2), ("threads", 4), ("processes", 2), ("processes", 4)]


@pytest.fixture(scope="module")
def ranks_run(run_fresh, npu_double_env, tmp_path_factory):
    @cache
    def run(scenario: str, mode: str, nranks: int, absent: tuple = (), extra: tuple = ()) -> dict:
        workdir = tmp_path_factory.mktemp(f"{scenario}-{mode}-{nranks}")
        (workdir / "rootinfo").mkdir()
        env = {**npu_double_env, "CHIPDOCK_NPU_SIM_DEVICES": "4", "HCCL_CONNECT_TIMEOUT": "60",
               "HCCL_EXEC_TIMEOUT": "60", "CHIPDOCK_NPU_HCCL_ROOT_INFO_DIR": str(workdir / "rootinfo"),
               "PYTHONPATH": str(TESTS_DIR), **dict(extra)}
        base = ["npu_collective_ranks", scenario, "--nranks", str(nranks), "--workdir", str(workdir)]
        if absent:
            base += ["--absent", *map(str, absent)]
        commands = [base] if mode == "threads" else [base + ["--rank", str(r)] for r in range(nranks)
                                                     if r not in absent]
        procs: list = [None] * len(commands)

        def launch(i: int) -> None:
            procs[i] = run_fresh(args=commands[i], env=env, timeout=600)

        threads = [threading.Thread(target=launch, args=(i,)) for i in range(len(commands))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        merged: dict = {}
        for proc in procs:
            assert proc.returncode == 0, proc.stderr[-4000:]
            merged.update(json.loads(proc.stdout.strip().splitlines()[-1])["ranks"])
        return merged

    return run


@pytest.mark.parametrize(("mode", "nranks"), MODES, ids=[f"{m}-{n}" for m, n in MODES])
@pytest.mark.parametrize("case", [c.name for c in MATRIX])
def test_every_collective_is_exact_on_every_rank(ranks_run, mode, nranks, case):
    ranks = ranks_run("matrix", mode, nranks)
    assert sorted(ranks) == [str(r) for r in range(nranks)]
    for rank, verdicts in ranks.items():
        assert verdicts["init_status"] == 0, verdicts["init_message"]
        assert verdicts[case] == "ok", (rank, verdicts[case])
        assert verdicts["destroy_status"] == 0, verdicts["destroy_message"]


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_a_rank_that_never_joins_fails_the_others_within_the_timeout(ranks_run, mode):
    ranks = ranks_run("join", mode, 3, absent=(2,), extra=(("HCCL_CONNECT_TIMEOUT", "2"),))
    assert sorted(ranks) == ["0", "1"]
    for outcome in ranks.values():
        assert outcome["init_status"] == 6, outcome  # DEVICE_ERROR
        message = outcome["init_message"]
        assert message.startswith("comm_init_rank: HcclCommInitRootInfo failed: 9 HCCL_E_TIMEOUT"), message
        assert "rank(s) 2 of 3 did not join" in message and "HCCL_CONNECT_TIMEOUT" in message
        assert 1.5 < outcome["init_seconds"] < 30


def test_the_ring_batched_into_hccl_batch_send_recv(ranks_run):
    ranks = ranks_run("ring", "threads", 3, extra=(("CHIPDOCK_NPU_HCCL_GROUPS", "batch"),))
    for verdicts in ranks.values():
        assert all(v == "ok" for k, v in verdicts.items() if k.startswith("send_recv")), verdicts


def test_refusals_a_destroyed_communicator_and_the_keyed_unique_id(run_fresh, npu_double_env, tmp_path):
    # The root info's padding filled with random bytes: it cannot travel inline, so the id is keyed (form 2).
    (tmp_path / "rootinfo").mkdir()
    env = {**npu_double_env, "CHIPDOCK_NPU_SIM_DEVICES": "2", "CHIPDOCK_NPU_SIM_HCCL_ROOT_INFO_FILL": "random",
           "HCCL_CONNECT_TIMEOUT": "30", "CHIPDOCK_NPU_HCCL_ROOT_INFO_DIR": str(tmp_path / "rootinfo"),
           "PYTHONPATH": str(TESTS_DIR)}
    proc = run_fresh(args=["npu_collective_ranks", "checks", "--nranks", "2", "--workdir", str(tmp_path)], env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    checks = json.loads(proc.stdout.strip().splitlines()[-1])["checks"]
    assert all(status == 1 for _, status, _ in checks["init"]) and checks["init_untouched"], checks["init"]
    refusals = {label: (status, message) for label, status, message in checks["refusals"]}
    assert refusals["AVG"][0] == 1 and "HCCL has no average" in refusals["AVG"][1]
    assert refusals["reduce bool"] == (1, "comm_all_reduce: dtype bool has no HCCL reduction (HCCL reduces int8, "
                                          "int16, int32, int64, float16, float32, bfloat16)")
    assert refusals["stream of device 1"][0] == 1 and "stream of device 1, communicator of device 0" in \
        refusals["stream of device 1"][1]
    assert all(status != 0 for status, _ in refusals.values()), refusals
    assert checks["after_refusals"] == ["ok", "ok"]  # nothing refused was queued
    destroyed = {label: (status, message) for label, status, message in checks["destroyed"]}
    assert destroyed["used after destroy"] == (2, "comm_all_reduce: unknown or destroyed communicator")
    assert destroyed["destroyed twice"][0] == 2
    assert checks["id_form"] == 2 and len(checks["id_files_after_get"]) == 1 and checks["id_files_after_init"] == []
    ids = {label: (status, message) for label, status, message in checks["ids"]}
    assert ids["fresh id, one rank"][0] == 0
    assert ids["the same id again"][0] == 1 and "CHIPDOCK_NPU_HCCL_ROOT_INFO_DIR" in ids["the same id again"][1]
