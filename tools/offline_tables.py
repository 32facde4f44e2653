"""Writes docs/offline.md's tables (between the ``offline-tables`` markers) from the committed JSON
of benchmarks/offline_recording.py, tools/offline_ope.py and tools/offline_baselines.py.

    python tools/offline_tables.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
    ope = _load("ope.json")
    if ope:
        out += [f"**OPE against the grader** (`{ope['command']}`; value: {ope['value']}):", ""]
        out += ["| target | true return | score |", "|---|---|---|"]
        out += [f"| {t} | {v:.1f} | {ope['score'][t]:.2f} |" for t, v in ope["truth"].items()]
        out += [
            "",
            "| dataset (behaviour) | estimator | mean abs. error | Spearman | regret@1 |",
            "|---|---|---|---|---|",
        ]
        for spec, res in ope["results"].items():
            for est, m in res["metrics"].items():
                row = f"{m['abs_error']:.1f} | {m['spearman']:.2f} | {m['regret_at_1']:.1f}"
                out.append(f"| {spec} | {est} | {row} |")
        out.append("")
    for base in (_load("baselines.json"), _load("baselines_long.json")):
        if not base:
            continue
        rule = f"{base['rule']}; learners: s.e. over seeds"
        out += [f"**Offline baselines** (`{base['command']}`; {rule}):", ""]
        out += [f"*Note:* {note}" for note in base.get("notes", [])] + [""]
        out += [
            "| dataset | method | score ± s.e. | margin over behaviour | beats behaviour |",
            "|---|---|---|---|---|",
        ]
        for r in base["rows"]:
            margin = "(s.e. over episodes)"
            if "margin" in r:
                margin = f"{r['margin']:+.2f} ± {r['margin_stderr']:.2f}"
            beats = ("yes" if r["beats_behaviour"] else "no") if "beats_behaviour" in r else ""
            score = f"{r['score']:.2f} ± {r['stderr']:.2f}"
            out.append(f"| {r['dataset']} | {r['method']} | {score} | {margin} | {beats} |")
        out.append("")
    return "\n".join(out)


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
