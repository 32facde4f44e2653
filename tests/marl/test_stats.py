"""grading.stats: rliable's IQM, bootstrap CIs and probability of improvement on matrices whose
answers are known by hand, and the marl-eval layout (checked against BenchMARL's own writer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rliable", reason="rliable not installed: pip install 'hospital-marl[marl]'")

from grading import stats

pytestmark = pytest.mark.xdist_group("marl")


def test_iqm_is_the_mean_of_the_middle_half_and_its_ci_brackets_it() -> None:
    # 4 runs x 2 tasks = 8 scores; the middle half (ranks 3-6) is 3, 4, 5, 6 -> IQM 4.5
    matrix = np.array([[1.0, 8.0], [3.0, 6.0], [4.0, 5.0], [2.0, 7.0]]) * 10
    est = stats.aggregate_estimates({"a": matrix}, reps=2000)["a"]
    assert est["iqm"] == pytest.approx(45.0)
    assert est["mean"] == pytest.approx(45.0)
    assert est["iqm_ci"][0] <= 45.0 <= est["iqm_ci"][1]
    assert est["iqm_ci"][1] - est["iqm_ci"][0] > 0  # the runs differ: a real interval
    outlier = stats.aggregate_estimates({"b": np.array([[0.0], [10.0], [20.0], [1000.0]])}, reps=500)["b"]
    assert outlier["iqm"] == pytest.approx(15.0) and outlier["mean"] == pytest.approx(257.5)


def test_bootstrap__reproducible_from_its_seed_and_leaves_the_global_generator_alone() -> None:
    matrix = np.array([[1.0, 8.0], [3.0, 6.0], [4.0, 5.0], [2.0, 7.0], [9.0, 0.0]])
    np.random.seed(7)
    before = np.random.get_state()[1].copy()
    first = stats.aggregate_estimates({"a": matrix}, reps=300, seed=3)["a"]
    assert np.array_equal(np.random.get_state()[1], before)  # the caller's stream is untouched
    np.random.random()  # whatever the caller draws in between does not change the next call
    assert stats.aggregate_estimates({"a": matrix}, reps=300, seed=3)["a"] == first
    assert stats.aggregate_estimates({"a": matrix}, reps=300, seed=4)["a"]["iqm_ci"] != first["iqm_ci"]


def test_probability_of_improvement_counts_pairs_per_task() -> None:
    base = np.array([[50.0, 60.0]])  # one deterministic baseline run
    better = np.array([[51.0, 61.0], [55.0, 70.0]])
    tied = np.array([[50.0, 60.0], [50.0, 60.0]])
    mixed = np.array([[49.0, 61.0], [49.0, 61.0]])  # worse on task 0, better on task 1
    res = stats.probability_of_improvement({"b": better, "t": tied, "m": mixed, "ref": base}, "ref", reps=500)
    assert res["b"]["p"] == pytest.approx(1.0)
    assert res["t"]["p"] == pytest.approx(0.5)  # ties count half
    assert res["m"]["p"] == pytest.approx(0.5)
    assert set(res) == {"b", "t", "m"}


def test_paired_margin_and_run_stderr_by_hand() -> None:
    ref = {"s": [10.0, 20.0]}
    runs = [{"s": [12.0, 22.0]}, {"s": [14.0, 20.0]}]  # margins 2 and 2 -> mean 2, se 0
    assert stats.paired_margin(runs, ref, "s") == pytest.approx((2.0, 0.0))
    runs = [{"s": [11.0, 21.0]}, {"s": [13.0, 23.0]}]  # margins 1 and 3 -> mean 2, se 1
    assert stats.paired_margin(runs, ref, "s") == pytest.approx((2.0, 1.0))
    assert stats.run_stderr(runs, "s") == pytest.approx(1.0)  # run means 16 and 18


def test_sample_efficiency_gives_one_iqm_per_point() -> None:
    curves = np.array([[[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]]])  # 3 runs, 1 task, 3 points
    out = stats.sample_efficiency({"a": curves}, reps=200)["a"]
    assert out["iqm"] == pytest.approx([1.0, 2.0, 3.0])
    assert out["low"] == pytest.approx([1.0, 2.0, 3.0]) and out["high"] == pytest.approx([1.0, 2.0, 3.0])


def test_marl_eval_layout_matches_benchmarls_writer(tmp_path: Path) -> None:
    import torch
    from benchmarl.experiment.logger import JsonWriter

    writer = JsonWriter(str(tmp_path), "x.json", "mappo", "surge", "hospital_marl", seed=3)
    writer.write(100, {"score": torch.tensor([70.0, 72.0])}, 0)
    writer.write(200, {"score": torch.tensor([75.0])}, 1)
    theirs = json.loads((tmp_path / "x.json").read_text())
    run = {"seed": 3, "curve": [(100, [70.0, 72.0]), (200, [75.0])], "final": [74.0, 76.0]}
    ours = stats.marl_eval_json("hospital_marl", "surge", {"mappo": [run]})
    seed = ours["hospital_marl"]["surge"]["mappo"]["seed_3"]
    expected = theirs["hospital_marl"]["surge"]["mappo"]["seed_3"]
    assert {k: v for k, v in seed.items() if k != "absolute_metrics"} == {
        k: v for k, v in expected.items() if k != "absolute_metrics"
    }
    assert seed["absolute_metrics"] == {"score": [74.0, 76.0]}  # the held-out evaluation


def marl_stats() -> Any:
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("marl_stats", root / "benchmarks" / "marl_stats.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_readme_section_is_what_the_command_renders_from_the_committed_artefacts() -> None:
    """One command regenerates the results page's MAPPO/IPPO table: it must match the committed JSON."""
    module = marl_stats()
    data = json.loads(module.RESULTS.read_text())
    computed = json.loads((module.OUT / "stats.json").read_text())
    readme = module.DOC.read_text()
    section = readme[readme.index(module.START) : readme.index(module.END) + len(module.END)]
    assert module.markdown(data, computed) == section
    for runs in data["algorithms"].values():
        assert len({r["seed"] for r in runs}) == len(runs)  # distinct training seeds
        assert {len(r["heldout"][s]) for r in runs for s in data["scenarios"]} == {
            data["heldout"]["episodes_per_scenario"]
        }


def test_collect_regrades_the_committed_runs_on_the_tables_days() -> None:
    """The table's runs are committed (actors + metadata), so ``collect`` needs no ``runs/``: every
    run in the JSON is there, and re-grading one reproduces its held-out scores on the same days
    (episode k of a scenario is the same day whatever the episode count). If the simulator's days
    change, this fails until ``collect`` and ``--write`` are re-run."""
    module = marl_stats()
    data = json.loads(module.RESULTS.read_text())
    committed = sorted(p.parent.name for p in module.COMMITTED.glob("*/benchmarl.json"))
    rows = data["algorithms"]
    trained = (r["run"] for name, runs in rows.items() if not name.endswith("_clone") for r in runs)
    assert committed == sorted(trained)
    for name in (n for n in rows if n.endswith("_clone")):  # a warm start's clone: a second row of its runs
        assert [r["run"] for r in rows[name]] == [r["run"] for r in rows[name.replace("_clone", "_warm")]]
    first = data["algorithms"]["mappo"][0]
    fresh = module.collect(module.COMMITTED, episodes=1, only=(first["run"],))
    (run,) = fresh["algorithms"]["mappo"]
    assert run["seed"] == first["seed"] and run["curve"] == first["curve"]
    for s in data["scenarios"]:
        assert run["heldout"][s] == pytest.approx(first["heldout"][s][:1], abs=1e-3)
        for name, scores in data["reference"].items():  # team_heuristic, team_planner (team track)
            assert fresh["reference"][name][s] == pytest.approx(scores[s][:1], abs=1e-3), name
        for name, scores in data["flat"]["policies"].items():  # ppo, heuristic, planner (flat track)
            assert fresh["flat"]["policies"][name][s] == pytest.approx(scores[s][:1], abs=1e-3), name


def test_targets_apply_spec_7_where_the_planner_finds_no_headroom() -> None:
    """A team 0.5 behind the heuristic on a scenario where the team planner is only 1 point ahead of
    the heuristic beats it there (within 1 point); 1.5 behind does not; on a scenario with headroom,
    only a positive margin counts. The flat verdict reads the flat planner's headroom. The gap
    target is the overall margin over the planner's overall margin. Synthetic days: the verdicts
    and shares are known by hand."""
    module = marl_stats()
    days = 4
    team = {"a": [80.0] * days, "b": [70.0] * days}
    planner = {"a": [81.0] * days, "b": [80.0] * days}  # headroom: a +1 (none), b +10; gap 5.5 overall
    flat = {
        "ppo": {"a": [81.0] * days, "b": [69.5] * days},
        "heuristic": {"a": [80.0] * days, "b": [70.0] * days},
        "planner": {"a": [90.0] * days, "b": [71.0] * days},  # flat headroom: a +10, b +1 (none)
    }

    def data(margin_a: float, margin_b: float = 1.0) -> dict[str, Any]:
        runs = [  # five seeds 0.01 apart: mean margins margin_a + 0.02, margin_b + 0.02
            {
                "heldout": {
                    "a": [80.0 + margin_a + 0.01 * k] * days,
                    "b": [70.0 + margin_b + 0.01 * k] * days,
                },
                "cpu_time_s": 60.0,
                "wall_time_s": 90.0,
            }
            for k in range(5)
        ]
        return {
            "scenarios": ["a", "b"],
            "reference": {module.REFERENCE: team, module.PLANNER: planner},
            "algorithms": {"mappo": runs},
            "flat": {"track": "flat", "policies": flat},
        }

    result = {"improvement": {"mappo": {"p": 0.5}}}
    assert module.headroom(data(0.0)) == pytest.approx({"a": 1.0, "b": 10.0})
    assert module.headroom(data(0.0), "flat") == pytest.approx({"a": 10.0, "b": 1.0})
    within = "\n".join(module.targets(data(-0.5), result))
    assert "on every scenario: met." in within and "`a` +1.0" in within
    assert "Met by MAPPO (BenchMARL), env reward (overall +0.27, P(improvement) 0.50)" in within
    assert "Not the others" not in within
    assert "The shipped flat `ppo` beats `heuristic` on every scenario on held-out days: met." in within
    behind = "\n".join(module.targets(data(-1.5), result))
    assert "on every scenario: not met." in behind
    assert "Not the others (scenarios beaten, of 2): MAPPO (BenchMARL), env reward 1." in behind
    assert "gap overall: not met." in behind
    assert module.gap_closed(data(-1.5), "mappo") == pytest.approx((-1.48 + 1.02) / 2 / 5.5)
    assert module.gap_closed(data(-0.5, 6.0), "mappo") == pytest.approx((-0.48 + 6.02) / 2 / 5.5)
    assert "gap overall: met." in "\n".join(module.targets(data(-0.5, 6.0), result))
    cloned = data(-1.5)  # a clone row (behaviour cloning, no PPO) that beats everywhere is not counted
    cloned["algorithms"]["mappo_clone"] = data(0.5, 6.0)["algorithms"]["mappo"]
    result_cloned = {"improvement": {"mappo": {"p": 0.5}, "mappo_clone": {"p": 0.9}}}
    assert module.trained_rows(cloned) == ["mappo"]
    text = "\n".join(module.targets(cloned, result_cloned))
    assert "on every scenario: not met." in text and "gap overall: not met." in text
    no_planner = data(-0.5)
    del no_planner["reference"][module.PLANNER]
    text = "\n".join(module.targets(no_planner, result))
    assert "on every scenario: not met." in text and "gap overall: not measured." in text


def test_margin_tables_and_episode_se_line_on_synthetic_days() -> None:
    """The margins table has one row per learned row (its margins per scenario and overall, the gap
    share, how many scenarios it beats, two decimals when it beats on all), the comparisons their
    own table, and the episode-level s.e. line names the largest and the rows above 1 point.
    Synthetic days (as above: headroom a +1, none; b +10; gap 5.5): every cell is known by hand."""
    module = marl_stats()
    days = 4
    team, planner = {"a": [80.0] * days, "b": [70.0] * days}, {"a": [81.0] * days, "b": [80.0] * days}
    wobble = [-2.0, 2.0, -2.0, 2.0]  # mean 0; episode s.e. sqrt(16 / 3) / 2 = 1.15

    def runs(margin_a: float, noisy: bool = False) -> list[dict[str, Any]]:
        return [  # five seeds 0.01 apart: margins margin_a + 0.02 and +1.02, s.e. between seeds 0.007
            {
                "heldout": {
                    "a": [80.0 + margin_a + 0.01 * k] * days,
                    "b": [71.0 + 0.01 * k + (w if noisy else 0.0) for w in wobble],
                }
            }
            for k in range(5)
        ]

    data = {
        "scenarios": ["a", "b"],
        "reference": {module.REFERENCE: team, module.PLANNER: planner},
        "algorithms": {"mappo": runs(-0.5), "ippo": runs(-1.5, noisy=True)},
    }
    lines = module.margin_tables(data)
    label = module.LABELS
    # MAPPO: within 1 point on a (no headroom), ahead on b: beats on 2 of 2, two decimals;
    # overall (-0.48 + 1.02) / 2 = 0.27, gap closed 0.27 / 5.5 = 5 %
    assert f"| {label['mappo']} | -0.48 ± 0.01 | +1.02 ± 0.01 | +0.27 ± 0.01 | +5% | 2 of 2 |" in lines
    # IPPO: 1.48 behind on a: beats on 1 of 2, one decimal; overall -0.23, gap -4 %
    assert f"| {label['ippo']} | -1.5 ± 0.0 | +1.0 ± 0.0 | -0.2 ± 0.0 | -4% | 1 of 2 |" in lines
    assert "| comparison | `a` | `b` | overall |" in lines
    assert f"| {module.PAIRS[('mappo', 'ippo')]} | +1.0 ± 0.0 | +0.0 ± 0.0 | +0.5 ± 0.0 |" in lines
    line = module.episode_se_line(data)
    assert f"largest 1.15 ({label['ippo']}, `b`)" in line and "`team_heuristic` 0.00" in line
    assert f"above 1 point on some scenario: 1 of 2 learned rows ({label['ippo']})." in line
    data["algorithms"]["ippo"] = runs(-1.5)  # no episode noise anywhere: within the limit
    assert "every learned row is within 1 point on every scenario" in module.episode_se_line(data)
    del data["algorithms"]["ippo"]  # one row: no comparison table
    assert not any(row.startswith("| comparison") for row in module.margin_tables(data))
