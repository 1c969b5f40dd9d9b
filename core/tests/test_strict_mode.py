"""Strict mode proves the core never dereferences device memory: there,
device pointers are not host addresses and a host read crashes."""

import signal

from core_helpers import run_python

READ_DEVICE_POINTER = """
import ctypes, numpy as np, chipdock
t = chipdock.tensor(np.array([42], dtype=np.int64))
print(ctypes.c_int64.from_address(t.data_ptr()).value, flush=True)
"""


def test_host_read_of_device_memory_crashes_in_strict_mode():
    proc = run_python(READ_DEVICE_POINTER, {"CHIPDOCK_CPU_STRICT": "1"})
    assert proc.returncode in (-signal.SIGSEGV, -signal.SIGBUS), (proc.returncode, proc.stderr)


def test_the_same_read_works_when_device_memory_is_host_memory():
    proc = run_python(READ_DEVICE_POINTER, {"CHIPDOCK_CPU_STRICT": "0"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42"
