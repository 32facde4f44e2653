"""The full dataset set's size/time table (docs/offline.md): runs ``hospital-marl datasets create`` for
every default behaviour of each track on every default scenario (and the ``train`` split) into a
scratch folder, and writes one row per dataset (steps, bytes, recording seconds, graded score) to
``docs/offline/datasets.json`` after each behaviour (a run cut short keeps what it made).

    python tools/offline_datasets.py --dir /tmp/hm_full --episodes 100 --grade-episodes 5
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--planner-episodes", type=int, default=10)
    parser.add_argument("--grade-episodes", type=int, default=5)
    parser.add_argument("--resume", action="store_true", help="skip the behaviours --out already has")
    parser.add_argument(
        "--out", default=str(Path(__file__).resolve().parents[1] / "docs/offline/datasets.json")
    )
    args = parser.parse_args()
    from hospital_marl_cli import main as cli
    from hospital_marl_cli.datasets import FLAT_DEFAULT, TEAM_DEFAULT

    rows, wall, cpu = [], time.perf_counter(), time.process_time()
    done: set[tuple[str, str]] = set()
    if args.resume and Path(args.out).exists():  # keep the rows of an earlier run into the same --dir
        earlier = json.loads(Path(args.out).read_text())
        rows, done = earlier["rows"], {tuple(d) for d in earlier.get("done", [])}
        wall -= earlier["wall_s"]
        cpu -= earlier["cpu_s"]
    flat = [b for b in FLAT_DEFAULT if b != "planner"]
    order = [("flat", b) for b in flat] + [("team", b) for b in TEAM_DEFAULT] + [("flat", "planner")]
    for track, behaviour in order:
        if (track, behaviour) in done:
            continue
        if True:
            argv = ["-q", "datasets", "create", "--dir", args.dir, "--track", track, "--behaviour", behaviour,
                    "--episodes", str(args.episodes), "--planner-episodes", str(args.planner_episodes),
                    "--grade-episodes", str(args.grade_episodes), "--force", "--json"]  # fmt: skip
            out = io.StringIO()
            start = time.perf_counter()
            with contextlib.redirect_stdout(out):
                status = cli(argv)
            if status:
                raise SystemExit(f"hospital-marl {' '.join(argv)} failed ({status})")
            made = json.loads(out.getvalue())
            rows += made
            total = {
                "command": "python " + " ".join(sys.argv),
                "rows": rows,
                "done": sorted(done | {(track, behaviour)}),
                "datasets": len(rows),
                "steps": sum(r["steps"] for r in rows),
                "bytes": sum(r["bytes"] for r in rows),
                "wall_s": time.perf_counter() - wall,
                "cpu_s": time.process_time() - cpu,
            }
            done.add((track, behaviour))
            Path(args.out).write_text(json.dumps(total, indent=1))
            print(
                track,
                behaviour,
                f"{time.perf_counter() - start:.0f} s",
                total["bytes"] / 1e6,
                "MB",
                flush=True,
            )


if __name__ == "__main__":
    main()
