"""The radiotherapy scoreboard on a 150-column console (what ``compare --env radiotherapy`` prints
when piped): every OAR header whole (issue #44: one table of every task's OARs truncated them,
``prosta…``)."""

from __future__ import annotations

from rich.console import Console

from grading.radiotherapy import comparison_tables, grade_all
from policies.radiotherapy import load


def test_oar_headers__whole_at_150_columns() -> None:
    reports = [grade_all(load(name), n_episodes=1, seed=0) for name in ("evenly_spaced", "anatomy_aware")]
    console = Console(width=150, record=True)
    for table in comparison_tables(reports):
        console.print(table)
    text = console.export_text()
    assert "…" not in text
    for task, summary in reports[0]["tasks"].items():
        assert f"OAR constraint pass rate: {task}" in text
        for oar in summary["oar_pass_rates"]:
            assert oar in text, (task, oar)
