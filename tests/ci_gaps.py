"""A pytest plugin: in CI (``CI`` set), a test that cannot import what it needs fails instead of skipping.

CI installs every extra (``pip install -e ".[dev]"``), so there a missing dependency is a gap in
the project's own install files, never a reason to skip: a module skipped at collection (a
module-level ``pytest.importorskip``) and a test skipped with ``could not import ...`` fail, with
the reason. Other skips stay skips and are listed in the summary (``addopts = "-ra"``).
Locally (no ``CI``), skips behave as usual.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

IMPORT_SKIP = "could not import"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def _reason(report: Any) -> str:
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped and isinstance(collector, pytest.Module):
        report.outcome = "failed"
        report.longrepr = (
            f"CI: {collector.nodeid} was skipped at import ({_reason(report)}); CI installs every extra, "
            "so a missing dependency is a gap in pyproject.toml's [dev] extra, not a skip"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped and IMPORT_SKIP in _reason(report):
        report.outcome = "failed"
        report.longrepr = f"CI: {_reason(report)}; CI installs every extra, so this is a gap, not a skip"
