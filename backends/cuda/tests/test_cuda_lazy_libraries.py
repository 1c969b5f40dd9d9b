"""cuBLASLt and NCCL are not linked: the plug-in opens them (src/lazy_library.cpp) the first time a call with a device
needs them, so importing chipdock pays for neither (cuBLASLt alone is about 150 MiB resident). Checked here: the
plug-in's NEEDED entries, where the wheels put the two libraries, and /proc/self/maps of fresh interpreters, without a
GPU and, where there is one, after a matmul and with NCCL missing."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from cuda_helpers import DEVICE, installed_package_dir, require_gpu, run_python

TESTS_DIR = Path(__file__).resolve().parent

# Each library the plug-in opens at run time, and the folder (relative to site-packages) its wheel installs it in.
LAZY = {"libcublasLt.so.13": "nvidia/cu13/lib", "libnccl.so.2": "nvidia/nccl/lib"}
CUDART = "libcudart.so.13"


def _needed(library: Path) -> set[str]:
    if shutil.which("readelf") is None:
        pytest.skip("readelf is not installed (binutils)")
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"\(NEEDED\).*\[(.+)\]", dynamic))


def _mapped_after(code: str) -> dict[str, bool]:
    """Which of libcudart, libcublasLt and libnccl a fresh interpreter has mapped after running `code`."""
    report = (f"import json\nmaps = open('/proc/self/maps').read()\n"
              f"print(json.dumps({{lib: lib in maps for lib in {[CUDART, *LAZY]!r}}}))")
    proc = run_python(textwrap.dedent(code) + "\n" + report)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_plugin_links_the_runtime_but_neither_cublaslt_nor_nccl():
    needed = _needed(installed_package_dir() / "libchipdock_cuda.so")
    assert CUDART in needed
    assert not {n for n in needed if n.startswith(("libcublas", "libnccl"))}, needed


@pytest.mark.parametrize("soname", LAZY)
def test_the_wheels_install_them_where_the_plugin_opens_them(soname):
    # The first place tried: <plug-in folder>/../<wheel folder>/<soname>, where the RUNPATH entry would look.
    assert (installed_package_dir().parent / LAZY[soname] / soname).is_file()


def test_importing_chipdock_and_listing_devices_maps_neither():
    installed_package_dir()
    mapped = _mapped_after(
        """
        import numpy as np, chipdock
        assert [b.status for b in chipdock.backends() if b.name == "cuda"] == ["accepted"]
        chipdock.devices()
        chipdock.tensor(np.arange(4, dtype=np.float32), device="cpu:0").numpy()
        """
    )
    # The runtime is mapped: the cuda plug-in really was loaded (and counted its devices).
    assert mapped == {CUDART: True, "libcublasLt.so.13": False, "libnccl.so.2": False}


def test_a_matmul_on_a_gpu_opens_cublaslt_and_not_nccl():
    if not DEVICE.startswith("cuda"):
        pytest.skip(f"opens cuBLASLt on a CUDA device, and the device tests run on {DEVICE} (CHIPDOCK_CUDA_TESTS_ON)")
    require_gpu()
    mapped = _mapped_after(
        f"""
        import numpy as np, chipdock
        from chipdock import ops
        a = chipdock.tensor(np.ones((8, 8), np.float32), device={DEVICE!r})
        assert (ops.matmul(a, a).numpy() == 8).all()
        """
    )
    assert mapped == {CUDART: True, "libcublasLt.so.13": True, "libnccl.so.2": False}


def test_a_missing_nccl_is_unavailable_and_names_the_paths_tried(tmp_path):
    """A private copy of the plug-in with no wheels beside it, on a GPU: comm_get_unique_id fails, nothing crashes."""
    if not DEVICE.startswith("cuda"):
        pytest.skip(f"the collectives are NCCL's: {DEVICE} (CHIPDOCK_CUDA_TESTS_ON) has none")
    require_gpu()
    proc = run_python(
        f"""
        import ctypes, json, sys
        from pathlib import Path
        sys.path.insert(0, {str(TESTS_DIR)!r})
        import test_cuda_collectives as t
        info = t._raw_api().table_info()
        plugin = t.Plugin(Path(info["library_path"]), info["abi_major"], info["abi_minor"], Path({str(tmp_path)!r}),
                          wheels_beside=False)
        code, message = plugin.status("comm_get_unique_id", ctypes.create_string_buffer(128))
        print(json.dumps([code, t.STATUS["UNAVAILABLE"], message, "libnccl" in open("/proc/self/maps").read()]))
        """
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    code, unavailable, message, nccl_mapped = json.loads(proc.stdout.strip().splitlines()[-1])
    if code == 0:
        pytest.skip("this host has a libnccl.so.2 the loader finds by soname")
    assert code == unavailable and not nccl_mapped, message
    assert message.startswith("comm_get_unique_id: NCCL is not available: tried "), message
    assert f"{tmp_path}/../nvidia/nccl/lib/libnccl.so.2: " in message and "; tried libnccl.so.2: " in message
    assert "pip install 'nvidia-nccl-cu13" in message
