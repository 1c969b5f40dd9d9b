"""Settings for the whole test suite.

The CPU reference runs in strict mode, where device pointers are not host
addresses: if the core ever dereferences device memory, a test crashes. Two
CPU devices exist so that cross-device paths are exercised.
"""

import os

os.environ.setdefault("CHIPDOCK_CPU_STRICT", "1")
os.environ.setdefault("CHIPDOCK_CPU_DEVICES", "2")
