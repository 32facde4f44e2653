"""tools/rt_edits.py: labels on training patients -> a ranked_selector checkpoint (issue 25 item 6)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from policies.radiotherapy.learned import load_path
from policies.radiotherapy.ranker import RankedSelectorPolicy

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import rt_edits  # noqa: E402


def test_save_keeps_a_ranker_only_on_the_sites_chosen(tmp_path: Path) -> None:
    """Labels of two tasks; the config turns the ranker off on one: the checkpoint loads as a
    ranked_selector with models (and a threshold) for the other site only, and the option selector
    of the same training seed choosing the variant."""
    stats = tmp_path / "stats.npz"
    rt_edits.do_label(
        argparse.Namespace(
            seed=0, patients=2, rounds=2, ridge=1.0, tasks=["prostate", "head_neck"], out=stats
        )
    )
    labelled = json.loads(stats.with_suffix(".json").read_text())
    assert set(labelled["tasks"]) == {"prostate", "head_neck"}
    prostate, head_neck = rt_edits.site_of("prostate"), rt_edits.site_of("head_neck")
    config = tmp_path / "sweep.json"
    chosen = {
        "prostate": {"site": list(prostate), "ridge": 0.1, "tau": 0.2},
        "head_neck": {"site": list(head_neck), "ridge": None, "tau": None},
    }
    config.write_text(json.dumps({"chosen": chosen}))
    out = tmp_path / "rt_ranked_selector_seed0.npz"
    rt_edits.do_save(argparse.Namespace(seed=0, stats=[stats], config=config, out=out))
    policy = load_path(out)
    assert isinstance(policy, RankedSelectorPolicy)
    assert {site for site, _ in policy.ranker.models} == {prostate}
    assert policy.ranker.taus == {prostate: 0.2}
    source = load_path(rt_edits.selector_path(0))
    assert policy.family == source.family  # type: ignore[attr-defined]
    assert policy.metadata["ranker"]["training_seed"] == 0
