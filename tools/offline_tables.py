"""Writes docs/offline.md's tables (between the ``offline-tables`` markers) from the committed JSON
of benchmarks/offline_recording.py, tools/offline_ope.py and tools/offline_baselines.py.

    python tools/offline_tables.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
DATA = ROOT / "docs" / "offline"
PAGE = ROOT / "docs" / "offline.md"


def _load(name: str) -> dict | None:
    path = DATA / name
    return json.loads(path.read_text()) if path.exists() else None


def tables() -> str:
    out = []
    bench = _load("recording_benchmark.json")
    if bench:
        where = f"B = {bench['envs']}, {bench['scenario']}"
        out += [f"**Recording** (`python benchmarks/offline_recording.py`, {where}):", ""]
        out += ["| what | env-steps/s per CPU second | wall (shared machine) |", "|---|---|---|"]
        for name, row in bench["rows"].items():
            out.append(f"| {name} | {row['steps_per_s_cpu']:,.0f} | {row['steps_per_s_wall']:,.0f} |")
        out.append("")
    full = _load("datasets.json")
    if full:
        out += [f"**The dataset set** (`{full['command']}`): {full['datasets']} datasets, "
                f"{full['steps']:,} steps, {full['bytes'] / 1e9:.2f} GB, recorded and graded in "
                f"{full['wall_s'] / 60:.0f} min wall ({full['cpu_s'] / 60:.0f} min CPU):", ""]  # fmt: skip
        out += ["| dataset | steps | MB | recording s | behaviour's graded score |", "|---|---|---|---|---|"]
        for r in full["rows"]:
            score = "" if r["graded_score"] is None else f"{r['graded_score']:.2f}"
            mb = r["bytes"] / 1e6
            out.append(f"| `{r['id']}` | {r['steps']:,} | {mb:.1f} | {r['record_seconds']:.2f} | {score} |")
        out.append("")
    opes = [o for o in (_load("ope.json"),) if o]
    if opes:
        out += _ope(opes)
    base = [
        b
        for b in (_load(n) for n in ("baselines.json", "baselines_fifo_rules.json", "baselines_tail.json"))
        if b
    ]
    if base:
        out += _baselines(base, "Offline baselines: every method × dataset quality, every scenario")
    for name, title in (
        ("baselines_fifo.json", "Near-expert data: what the field does on `fifo_severity`"),
        ("baselines_long.json", "Longer training (surge, earlier session)"),
    ):
        one = _load(name)
        if one:
            out += _baselines([one], title)
    return "\n".join(out)


def _order(rows: list[dict]) -> list[dict]:
    """Rows in the scenarios' order (the five, then ``train``), then their behaviours' (as first
    seen), stable otherwise."""
    from offline_common import SCENARIOS

    first: dict[str, int] = {}
    for r in rows:
        first.setdefault(r.get("behaviour", r["dataset"]), len(first))

    def key(r: dict) -> tuple[int, int]:
        where = SCENARIOS.index(r["scenario"]) if r["scenario"] in SCENARIOS else len(SCENARIOS)
        return where, first[r.get("behaviour", r["dataset"])]

    return sorted(rows, key=key)


def _ope(runs: list[dict]) -> list[str]:
    """The truth per target and scenario, then each estimator's errors per dataset, then the
    estimators' averages over every dataset (the runs' rows together: the same settings, split
    over scenarios)."""
    ope = runs[0]
    rows = _order([r for run in runs for r in run["rows"]])
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    targets = list(rows[0]["truth"])
    truth = {r["scenario"]: r["truth"] for r in rows}
    score = {r["scenario"]: r["score"] for r in rows}
    commands = "`; `".join(run["command"] for run in runs)
    out = [f"**OPE against the grader** (`{commands}`; value: {ope['value']}; targets "
           "`method@behaviour` are offline learners trained on that behaviour's dataset of the "
           "scenario, seed 0). True return (score) of each target:", ""]  # fmt: skip
    out += ["| target | " + " | ".join(scenarios) + " |", "|---" * (len(scenarios) + 1) + "|"]
    for t in targets:
        cells = [f"{truth[s][t]:.0f} ({score[s][t]:.1f})" for s in scenarios]
        out.append(f"| {t} | " + " | ".join(cells) + " |")
    out += ["", "| scenario | dataset (behaviour) | estimator | mean abs. error | Spearman | regret@1 |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        for est, m in r["metrics"].items():
            cells = f"{m['abs_error']:.1f} | {m['spearman']:.2f} | {m['regret_at_1']:.1f}"
            out.append(f"| {r['scenario']} | {r['behaviour']} | {est} | {cells} |")
    out += ["", f"Averaged over the {len(rows)} datasets above:", "",
            "| estimator | mean abs. error | mean Spearman | mean regret@1 | best Spearman on |",
            "|---|---|---|---|---|"]  # fmt: skip
    estimators = list(rows[0]["metrics"])
    best = [max(estimators, key=lambda e: r["metrics"][e]["spearman"]) for r in rows]
    for est in estimators:
        ms = [r["metrics"][est] for r in rows]
        mean = {k: sum(m[k] for m in ms) / len(ms) for k in ("abs_error", "spearman", "regret_at_1")}
        out.append(f"| {est} | {mean['abs_error']:.1f} | {mean['spearman']:.2f} | {mean['regret_at_1']:.1f} "
                   f"| {best.count(est)} |")  # fmt: skip
    return [*out, ""]


def _baselines(runs: list[dict], title: str) -> list[str]:
    """Every method x dataset row, the behaviour first, and which beat their behaviour (the runs'
    rows together: the same settings, split over scenarios and datasets)."""
    base = runs[0]
    rule = f"{base['rule']}; learners: s.e. over training seeds"
    commands = "`; `".join(run["command"] for run in runs)
    out = [f"**{title}** (`{commands}`; {rule}):", ""]
    out += [f"*Note:* {note}" for run in runs for note in run.get("notes", [])]
    rows, seen = [], set()
    for run in runs:  # a row two runs both made: the first file's
        for r in run["rows"]:
            key = (r.get("scenario", run.get("scenario", "")), r["dataset"], r["method"])
            if key not in seen:
                seen.add(key)
                rows.append({**r, "scenario": key[0]})
    rows = _order(rows)
    out += ["", "| scenario | dataset | method | score ± s.e. | margin over behaviour | beats behaviour |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        margin = "(s.e. over episodes)"
        if "margin" in r:
            margin = f"{r['margin']:+.2f} ± {r['margin_stderr']:.2f}"
        beats = ("**yes**" if r["beats_behaviour"] else "no") if "beats_behaviour" in r else ""
        scenario = r["scenario"]
        dataset = r.get("behaviour", r["dataset"].split("-", 2)[-1])
        out.append(f"| {scenario} | {dataset} | {r['method']} | {r['score']:.2f} ± {r['stderr']:.2f} "
                   f"| {margin} | {beats} |")  # fmt: skip
    won = [r for r in rows if r.get("beats_behaviour")]
    learners = [r for r in rows if "beats_behaviour" in r]
    out += ["", f"{len(won)} of {len(learners)} learner rows beat their behaviour"
            + (": " + ", ".join(f"{r['method']} on {r['scenario']} "
                                f"{r.get('behaviour', r['dataset'])}" for r in won) if won else "")
            + ".", ""]  # fmt: skip
    return out


def main() -> None:
    text = PAGE.read_text()
    new = re.sub(
        r"(<!-- offline-tables -->\n).*?(<!-- /offline-tables -->)",
        lambda m: m.group(1) + tables() + "\n" + m.group(2),
        text,
        flags=re.S,
    )
    PAGE.write_text(new)


if __name__ == "__main__":
    main()
