"""Reports -> tables: rich tables for the terminal, Markdown for the README."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

BAR_WIDTH = 12


def bar(score: float, width: int = BAR_WIDTH) -> str:
    filled = max(0, min(width, round(score / 100 * width)))
    return "█" * filled + "·" * (width - filled)


def summary_rows(reports: Sequence[dict[str, Any]]) -> list[list[str]]:
    """One row per agent: overall, survival, critical, wait, utilisation, invalid, bar."""
    return [
        [
            r["agent"],
            f"{r['overall_score']:.2f}",
            f"{100 * r['survival_rate']:.1f}%",
            f"{100 * r['critical_patient_survival']:.1f}%",
            f"{r['avg_wait_time']:.2f}",
            f"{100 * r['resource_utilization']:.1f}%",
            f"{100 * r['invalid_action_rate']:.1f}%",
            bar(r["overall_score"]),
        ]
        for r in reports
    ]


SUMMARY_HEADER = ["agent", "overall", "survival", "critical", "wait (ticks)", "util", "invalid", "bar"]
"""`wait` is avg_wait_time in ticks of 14.4 minutes; survival, critical, util and invalid are percentages."""


def scenario_rows(reports: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Per-scenario scores ± standard error, one row per agent."""
    names = list(reports[0]["scenario_scores"]) if reports else []
    rows = [
        [r["agent"]]
        + [f"{r['scenarios'][n]['score']:.2f} ± {r['scenarios'][n]['score_stderr']:.2f}" for n in names]
        for r in reports
    ]
    return ["agent", *names], rows


def comparison_tables(reports: Sequence[dict[str, Any]]) -> list[Any]:
    """The scoreboard as two rich tables (summary, per scenario)."""
    track = reports[0]["track"] if reports else "flat"
    summary = Table(title=f"hospital_marl — agent comparison ({track} track)")
    for i, col in enumerate(SUMMARY_HEADER):
        summary.add_column(col, justify="left" if i in (0, 7) else "right")
    for row in summary_rows(reports):
        summary.add_row(*row)
    header, rows = scenario_rows(reports)
    per_scenario = Table(title="score per scenario (mean ± standard error over episodes)")
    for i, col in enumerate(header):
        per_scenario.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        per_scenario.add_row(*row)
    return [summary, per_scenario]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def comparison_markdown(reports: Sequence[dict[str, Any]]) -> str:
    """The scoreboard as Markdown (what the README shows)."""
    summary = markdown_table(SUMMARY_HEADER[:-1], [row[:-1] for row in summary_rows(reports)])
    header, rows = scenario_rows(reports)
    return summary + "\n\n" + markdown_table(header, rows)


def replace_marked(document: str, start: str, end: str, replacement: str) -> str:
    """``document`` with everything from ``start`` through ``end`` replaced (generated doc sections)."""
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(document):
        raise ValueError(f"the document has no {start} ... {end} markers")
    return pattern.sub(lambda _: replacement, document, count=1)


def write_marked(path: Path, start: str, end: str, replacement: str) -> None:
    """Rewrite one generated section of a Markdown file in place (the markers stay in ``replacement``)."""
    try:
        path.write_text(replace_marked(path.read_text(), start, end, replacement))
    except ValueError as exc:
        raise SystemExit(f"{path}: {exc}") from None
