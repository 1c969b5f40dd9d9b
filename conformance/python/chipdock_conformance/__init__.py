"""chipdock conformance and precision suites (``chipdock conformance``).

``runner.run`` / ``chipdock conformance`` run the suites in child processes and write the reports;
``pytest --chipdock-device TYPE[:ORDINAL]`` runs the same cases as pytest items (``pytest_plugin``).
"""

from importlib.metadata import PackageNotFoundError, version

from .case import Case, CaseResult, Context

try:
    __version__ = version("chipdock")  # the suites ship in the core wheel and move with it
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["Case", "CaseResult", "Context", "__version__"]
