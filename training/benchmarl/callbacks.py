"""The BenchMARL callback of ``train benchmarl``: periodic team-track grading on validation days.

Imported only inside :func:`training.benchmarl.train.train` (it needs BenchMARL). BenchMARL
pickles its callbacks with the experiment's config, so the callback pickles only its
arguments (not the evaluation function, the experiment or the curve).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from benchmarl.experiment.callback import Callback

from training.benchmarl.actors import export_actors, load_benchmarl_policy_dir, masked_actions_taken
from training.benchmarl.args import Args
from training.common import Clock, Evaluate, eval_row, write_curve


class ValidationGrading(Callback):
    """After BenchMARL's evaluation: export the actors, grade them on validation days, keep the best."""

    def __init__(self, args: Args, run_dir: Path, evaluate: Evaluate) -> None:
        super().__init__()
        self.args, self.run_dir, self.evaluate = args, run_dir, evaluate
        self.rows: list[dict[str, Any]] = []
        self.best: dict[str, Any] | None = None
        self.clock = Clock()
        self.audit = {"masked_actions_taken": 0, "audited_actions": 0}

    def __getstate__(self) -> dict[str, Any]:
        return {"args": self.args, "run_dir": self.run_dir}

    def on_batch_collected(self, batch: Any) -> None:
        """The masked-action audit: every collected action must be allowed by its role's mask."""
        taken, total = masked_actions_taken(batch)
        self.audit["masked_actions_taken"] += taken
        self.audit["audited_actions"] += total

    def on_evaluation_end(self, rollouts: list[Any]) -> None:
        self.grade_now()

    def grade_now(self) -> None:
        experiment = self.experiment
        frames = int(experiment.total_frames)
        if self.rows and self.rows[-1]["frames"] == frames:
            return
        export_actors(experiment, self.run_dir / "final")
        policy = load_benchmarl_policy_dir(self.run_dir, "final", self.args.algorithm)
        args = self.args
        report = self.evaluate(
            policy, episodes=args.eval_episodes, seed=args.eval_seed, scenarios=args.scenarios, track="team"
        )
        row = {"frames": frames, **eval_row(report, 3 * frames, self.clock)}
        row["role_decisions"] = row.pop("timesteps")
        self.rows.append(row)
        if self.best is None or row["eval_score"] > self.best["eval_score"]:
            self.best = row
            export_actors(experiment, self.run_dir / "best")
        write_curve(self.rows, self.run_dir)
        if self.args.progress:
            print(
                f"\n[{self.args.algorithm} s{self.args.seed}] frames {frames:,}: validation score "
                f"{row['eval_score']:.2f} (best {self.best['eval_score']:.2f}), "
                f"invalid {row['invalid_action_rate']:.2%}, {row['wall_time_s']:.0f} s",
                file=sys.stderr,
            )
