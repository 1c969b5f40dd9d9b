"""chipdock conformance and precision suites (``chipdock conformance``)."""

from .case import Case, CaseResult, Context

__all__ = ["Case", "CaseResult", "Context"]
