"""Exceptions raised by chipdock.

Every error names the backend (or ``core``), the call that failed and the
reason: ``[cpu] memcpy_host_to_device: range ... overruns ...``. The C++ core
raises these through its Python binding; nothing here imports the binding.
"""

from __future__ import annotations


class ChipdockError(RuntimeError):
    """Base class of every chipdock error."""

    #: The ABI status name this class stands for (CD_STATUS_* without prefix).
    default_code = "ERROR"

    def __init__(
        self,
        message: str,
        *,
        backend: str = "core",
        call: str = "",
        reason: str = "",
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.backend = backend
        self.call = call
        self.reason = reason or message
        self.code = code or self.default_code

    @classmethod
    def make(cls, backend: str, call: str, reason: str) -> ChipdockError:
        """Builds an error with the standard ``[backend] call: reason`` message."""
        return cls(f"[{backend}] {call}: {reason}", backend=backend, call=call, reason=reason)


class InvalidArgumentError(ChipdockError, ValueError):
    """A bad value the caller could have checked (shape, dtype, ordinal...)."""

    default_code = "INVALID_ARGUMENT"


class OutOfRangeError(InvalidArgumentError, IndexError):
    """An access beyond an allocation or a view."""

    default_code = "OUT_OF_RANGE"


class InvalidHandleError(ChipdockError):
    """A destroyed, unknown or foreign stream/event/allocation handle."""

    default_code = "INVALID_HANDLE"


class OutOfMemoryError(ChipdockError, MemoryError):
    """The device had no room, even after the allocator released its cache."""

    default_code = "OUT_OF_MEMORY"


class UnimplementedError(ChipdockError, NotImplementedError):
    """The backend leaves this function or kernel unimplemented."""

    default_code = "UNIMPLEMENTED"


class NotReadyError(ChipdockError):
    """Work is still pending (e.g. elapsed time of an unfinished event)."""

    default_code = "NOT_READY"


class DeviceError(ChipdockError):
    """The device or its runtime failed."""

    default_code = "DEVICE_ERROR"


class UnavailableError(ChipdockError):
    """The vendor runtime or driver is missing or too old."""

    default_code = "UNAVAILABLE"


class PluginRefusedError(ChipdockError):
    """A backend plugin was refused at load time; ``reason`` says why."""

    default_code = "PLUGIN_REFUSED"


class FallbackWarning(UserWarning):
    """An op ran on the CPU reference because its device had no kernel for it."""


__all__ = [
    "FallbackWarning",
    "ChipdockError",
    "DeviceError",
    "InvalidArgumentError",
    "InvalidHandleError",
    "NotReadyError",
    "OutOfMemoryError",
    "OutOfRangeError",
    "PluginRefusedError",
    "UnavailableError",
    "UnimplementedError",
]
