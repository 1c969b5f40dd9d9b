"""pytest plugin: ``pytest --chipdock-device TYPE[:ORDINAL]`` runs the conformance cases as pytest items.

Registered through the ``pytest11`` entry point of the core wheel, so it is loaded by every pytest run of an
environment with chipdock installed. Without ``--chipdock-device`` it only adds its options: it imports
neither chipdock nor a suite, and adds no item.

With the option, every case of the registered suites becomes one item, named by its case id, under one node
per group (``chipdock-conformance::<group>::<case id>``), and marked with ``conformance`` and its group name
(``-m ops.add``). ``--chipdock-suite quick|full`` chooses the cases as ``chipdock conformance --suite`` does.
Items run in the pytest process itself, so a vendor's CI gets pytest's selection (``-k``, ``-m``), JUnit
(``--junitxml``) and pytest-xdist; a crashing case takes the pytest process (or the xdist worker) with it.
``chipdock conformance`` isolates cases in child processes instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT_NODE = "chipdock-conformance"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chipdock", "chipdock conformance suites")
    group.addoption("--chipdock-device", metavar="TYPE[:ORDINAL]", default=None,
                    help="run the chipdock conformance cases on this device (the plugin is inert without it)")
    group.addoption("--chipdock-suite", choices=("quick", "full"), default="quick",
                    help="quick: the cases marked quick (default); full: every case")
    group.addoption("--chipdock-seed", type=int, default=0, help="seed of the generated inputs (default 0)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("chipdock_device"):
        config.addinivalue_line("markers", "conformance: a chipdock conformance case")


class CaseFailed(Exception):
    """A case that returned status "fail": its reason and metrics are the whole story, no traceback."""

    def __init__(self, reason: str, metrics: dict[str, Any]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.metrics = metrics


class ConformanceItem(pytest.Item):
    """One conformance case, run in-process."""

    def __init__(self, *, case: Any, ctx: Any, source: Path | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.ctx = ctx
        self.source = source

    def runtest(self) -> None:
        from .case import CaseResult
        from .worker import jsonable

        result = self.case.run(self.ctx)
        if not isinstance(result, CaseResult):
            raise TypeError(f"{self.case.id}: run returned {type(result).__name__}, not a CaseResult")
        if result.metrics:  # --junitxml writes them as <property name="metrics">
            self.user_properties.append(("metrics", json.dumps(jsonable(result.metrics))))
        if result.status == "skip":
            pytest.skip(f"{self.case.id}: {result.reason}")
        if result.status == "fail":
            raise CaseFailed(result.reason, result.metrics)
        if result.status != "pass":
            raise ValueError(f"{self.case.id}: run returned the status {result.status!r}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | Any:
        if isinstance(excinfo.value, CaseFailed):
            from .worker import jsonable

            text = f"{self.case.id} failed: {excinfo.value.reason}"
            if excinfo.value.metrics:
                text += f"\nmetrics: {json.dumps(jsonable(excinfo.value.metrics))}"
            return text
        # Start the traceback at the case's own code: pytest's frames and runtest's say nothing about it.
        entries = excinfo.traceback.cut(path=Path(__file__))
        if len(entries) > 1:
            excinfo.traceback = entries[1:]
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path | str, int | None, str]:
        return (self.source or self.path, None, self.case.id)


class CollectFailedItem(pytest.Item):
    """A suite that could not be collected: one failing item, so the failure shows and the run fails."""

    def __init__(self, *, error: str, details: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error
        self.details = details

    def runtest(self) -> None:
        raise CaseFailed(self.error, {})

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return f"{self.error}\n{self.details}"

    def reportinfo(self) -> tuple[Path | str, int | None, str]:
        return (self.path, None, self.name)


class ConformanceNode(pytest.Collector):
    """A node of the conformance tree (the root, or one group): its items are made by ``_items``."""

    def __init__(self, *, children: list[pytest.Item | pytest.Collector] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.children: list[pytest.Item | pytest.Collector] = children or []

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        return list(self.children)


def _device_or_usage_error(spec: str) -> str:
    """The device as "type:ordinal"; pytest.UsageError naming the devices that exist if it does not."""
    from .runner import UsageError, normalize_device
    from .worker import device_problem

    try:
        device = normalize_device(spec)
    except UsageError as exc:
        raise pytest.UsageError(str(exc).replace("--device", "--chipdock-device")) from None
    problem = device_problem(device, "--chipdock-device")
    if problem:
        raise pytest.UsageError(problem)
    return device


def _items(session: pytest.Session, config: pytest.Config, spec: str) -> list[pytest.Item]:
    import importlib.util

    from .case import Context
    from .suites import SuiteSpecError, collect_suite, registry

    device = _device_or_usage_error(spec)
    level = config.getoption("chipdock_suite")
    ctx = Context(device=device, level=level, seed=config.getoption("chipdock_seed"))
    try:
        suites = registry()
    except SuiteSpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    root = ConformanceNode.from_parent(session, name=ROOT_NODE, nodeid=ROOT_NODE)
    groups: dict[str, ConformanceNode] = {}
    items: list[pytest.Item] = []

    def group_node(name: str) -> ConformanceNode:
        if name not in groups:
            config.addinivalue_line("markers", f"{name}: chipdock conformance group {name}")
            groups[name] = ConformanceNode.from_parent(root, name=name)
            root.children.append(groups[name])
        return groups[name]

    for name, module in suites.items():
        collected = collect_suite(name, module, ctx)
        if collected.error:
            parent = group_node(f"{name}.collect")
            item = CollectFailedItem.from_parent(parent, name=f"{name}/collect", error=(
                f"collecting suite {name} ({module}) failed: {collected.error}"), details=collected.details)
            item.add_marker("conformance")
            item.add_marker(parent.name)
            parent.children.append(item)
            items.append(item)
            continue
        found = importlib.util.find_spec(module)
        source = Path(found.origin) if found and found.origin else None
        for case in collected.cases:
            if level == "quick" and not case.quick:
                continue
            parent = group_node(case.group)
            item = ConformanceItem.from_parent(parent, name=case.id, case=case, ctx=ctx, source=source)
            item.add_marker("conformance")
            item.add_marker(case.group)
            parent.children.append(item)
            items.append(item)
    # Announce the tree as pytest's own collection does, so that the counts in the terminal
    # ("N tests collected", "M deselected") include these items.
    for node in (root, *groups.values()):
        config.hook.pytest_collectreport(report=pytest.CollectReport(node.nodeid, "passed", None, node.collect()))
    return items


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection, which runs in the same hook
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    spec = config.getoption("chipdock_device")
    if spec:
        items.extend(_items(session, config, spec))
