"""The fast trainer's behaviour diagnostic (training/fast/diagnostics.py) on a hand-made batch of four
ticks, every expected number worked out by hand from SPEC §3's action table (triage 11-20: ICU
admissions; bed manager 1-5: transfers, 11-15: ICU discharges; ventilator officer 1-3: ventilate)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from training.fast.diagnostics import DIAGNOSTIC_FILE, behaviour, table_markdown

N = 4


def batch() -> dict[str, object]:
    sizes = {"triage": 21, "bed_manager": 16, "ventilator_officer": 4}
    masks = {role: torch.zeros(N, n, dtype=torch.bool) for role, n in sizes.items()}
    for m in masks.values():
        m[:, 0] = True  # no-ops
    masks["triage"][0, 11] = True  # tick 0: an ICU admission possible
    masks["triage"][1, [1, 12]] = True  # tick 1: a general and an ICU admission
    masks["triage"][2, 1] = True
    masks["bed_manager"][1, 11] = True  # tick 1: a step-down possible
    masks["bed_manager"][2, 1] = True  # tick 2: a transfer possible
    masks["ventilator_officer"][0, 1] = True
    masks["ventilator_officer"][2, [1, 2]] = True
    probs = {role: m.float() / m.float().sum(1, keepdim=True) for role, m in masks.items()}
    probs["triage"][0] = 0.0
    probs["triage"][0, [0, 11]] = torch.tensor([0.7, 0.3])
    probs["triage"][1] = 0.0
    probs["triage"][1, [0, 1, 12]] = torch.tensor([0.5, 0.1, 0.4])
    actions = torch.tensor([[11, 0, 1], [0, 11, 0], [1, 1, 0], [0, 0, 0]])
    values = torch.tensor([1.0, 4.0, 0.0, 2.0])
    returns = torch.tensor([2.0, 1.0, 0.0, 2.5])  # errors 1, -3, 0, 0.5
    advantages = torch.tensor([2.0, -1.0, 0.5, 0.0])
    finished = [
        {"critical_total": 4.0, "critical_deaths": 1.0},
        {"critical_total": 6.0, "critical_deaths": 1.0},
    ]
    return {"probs": probs, "masks": masks, "actions": actions, "advantages": advantages,
            "values": values, "returns": returns, "finished": finished}  # fmt: skip


def test_behaviour__probabilities_advantages_and_table_on_a_hand_made_batch() -> None:
    out = behaviour(**batch())
    icu = out["types"]["icu_triage"]
    assert icu["valid"] == 2 and icu["taken"] == 1
    assert icu["p_where_valid"] == pytest.approx((0.3 + 0.4) / 2)
    assert icu["taken_where_valid"] == pytest.approx(0.5)
    assert icu["adv_taken"] == pytest.approx(2.0)
    assert icu["adv_not_taken_where_valid"] == pytest.approx(-1.0)
    vent = out["types"]["ventilate"]
    assert (vent["valid"], vent["taken"]) == (2, 1)
    assert vent["p_where_valid"] == pytest.approx((1 / 2 + 2 / 3) / 2)  # uniform over the valid ones
    assert out["types"]["icu_discharge"]["adv_taken"] == pytest.approx(-1.0)
    assert out["types"]["transfer"]["adv_taken"] == pytest.approx(0.5)
    assert out["types"]["early_discharge"]["valid"] == 0
    assert out["types"]["early_discharge"]["p_where_valid"] is None
    assert out["value_rmse"]["icu_triage"] == pytest.approx(math.sqrt((1 + 9) / 2))
    assert out["value_rmse"]["no_rare_type_valid"] == pytest.approx(0.5)  # tick 3 only
    assert out["value_rmse"]["all"] == pytest.approx(math.sqrt((1 + 9 + 0 + 0.25) / 4))
    assert out["table"] == {
        "icu_admissions": 1,
        "step_downs": 1,
        "transfers": 1,
        "ventilations": 1,
        "ventilation_possible": 2,
        "critical_survival": pytest.approx(0.8),
        "days": 2,
    }
    md = table_markdown({"mappo": out["table"]})
    assert "| ventilates when it can | 1 of 2 |" in md and "| critical-patient survival | 0.80 |" in md


def test_behaviour__per_role_critics_use_the_role_own_advantage_and_value() -> None:
    b = batch()
    adv = torch.zeros(N, 3)
    adv[:, 0], adv[:, 2] = b["advantages"], -b["advantages"]  # type: ignore[index,operator]
    values, returns = torch.zeros(N, 3), torch.zeros(N, 3)
    values[:, 2] = 1.0
    out = behaviour(**{**b, "advantages": adv, "values": values, "returns": returns})
    assert out["types"]["icu_triage"]["adv_taken"] == pytest.approx(2.0)  # triage's column
    assert out["types"]["ventilate"]["adv_taken"] == pytest.approx(-2.0)  # the officer's column
    assert out["value_rmse"]["icu_triage"] == pytest.approx(0.0)
    assert out["value_rmse"]["ventilate"] == pytest.approx(1.0)


def test_fast_mappo__logs_the_diagnostic_every_update(tmp_path: Path) -> None:
    from tests.training.test_fast import mappo_run

    run = mappo_run(tmp_path, "diag")  # 600 frames, 10 departments x 30 ticks: two updates
    lines = [json.loads(line) for line in (run / DIAGNOSTIC_FILE).read_text().splitlines()]
    assert [row["frames"] for row in lines] == [300, 600]
    for row in lines:
        assert 0.0 <= row["types"]["ventilate"]["p_where_valid"] <= 1.0
        assert row["table"]["ventilations"] <= row["table"]["ventilation_possible"]
    meta = json.loads((run / "fast.json").read_text())
    assert meta["behaviour"] == lines[-1]


def test_type_entropy__is_the_entropy_of_the_action_type_distribution() -> None:
    """Triage with every action valid and uniform: no-op 1/21, general admissions 10/21, ICU
    admissions 10/21 (SPEC §3); with only the no-op and one ICU admission valid, at 50/50: log 2."""
    from training.fast.diagnostics import type_entropy

    uniform = torch.zeros(1, 21)
    p = torch.tensor([1 / 21, 10 / 21, 10 / 21])
    assert float(type_entropy(uniform, "triage")[0]) == pytest.approx(float(-(p * p.log()).sum()), rel=1e-5)
    two = torch.full((1, 21), -1e9)
    two[0, [0, 15]] = 0.0
    assert float(type_entropy(two, "triage")[0]) == pytest.approx(math.log(2), rel=1e-5)
    vent = torch.zeros(1, 4)  # no-op 1/4, ventilate 3/4
    q = torch.tensor([0.25, 0.75])
    assert float(type_entropy(vent, "ventilator_officer")[0]) == pytest.approx(
        float(-(q * q.log()).sum()), rel=1e-5
    )


def test_behaviour__splits_triage_admissions_by_the_admitted_patient_severity() -> None:
    """Queue slot 0 critical (severity 4), slot 1 not (2) (SPEC §3: triage 1-10 admit slot i-1 to a
    general bed, 11-20 to an ICU bed). Tick 0 admits slot 0 to the ICU, tick 1 slot 1 to the ICU,
    tick 2 slot 0 to a general bed."""
    b = batch()
    severity = torch.zeros(N, 10)
    severity[:, 0], severity[:, 1] = 4.0, 2.0
    masks = b["masks"]
    masks["triage"][:] = False  # type: ignore[index]
    masks["triage"][:, [0, 1, 2, 11, 12]] = True  # type: ignore[index]
    probs = {**b["probs"], "triage": torch.zeros(N, 21)}  # type: ignore[dict-item]
    probs["triage"][:, [0, 11, 12]] = torch.tensor([0.5, 0.2, 0.3])
    actions = torch.tensor([[11, 0, 0], [12, 0, 0], [1, 0, 0], [0, 0, 0]])
    out = behaviour(**{**b, "masks": masks, "probs": probs, "actions": actions, "queue_severity": severity})
    split = out["triage_by_severity"]
    assert split["icu_critical"] == {"taken": 1, "adv_taken": pytest.approx(2.0)}
    assert split["icu_non_critical"] == {"taken": 1, "adv_taken": pytest.approx(-1.0)}
    assert split["general_critical"] == {"taken": 1, "adv_taken": pytest.approx(0.5)}
    assert split["general_non_critical"] == {"taken": 0, "adv_taken": None}
    assert split["p_icu_for_a_critical_where_valid"] == pytest.approx(0.2)  # slot 0's ICU action only
    assert split["states_with_icu_for_a_critical_valid"] == N
