"""The fast MAPPO / IPPO trainer's behaviour diagnostic, logged for every update (issue #40).

Why: a from-scratch team can plateau below the rules with a healthy loss curve, because the rare
actions whose value arrives many ticks later (admitting to the ICU, stepping a patient down) are
driven to probability ~0 while a frequent, immediately rewarded one (ventilating whenever
possible) is driven to 1. The score alone cannot show that; these numbers do. Over one rollout:

- per action type, where some action of that type is valid: the policy's probability of the type
  (the sum of its actions' probabilities under the policy that collected the rollout), how often it
  was taken, and the mean GAE advantage of the samples that took it and of those that could have
  and did not (raw advantages, before the per-minibatch normalisation);
- the critic's error (root mean square of return - value) by state type: the ticks where each type
  was valid, and those where none of the rare types was;
- the behaviour table of issue #40: ICU admissions, step-downs (ICU discharges), transfers,
  ventilations out of the ticks where one was possible, and the critical-patient survival of the
  days that finished during the rollout.

Everything is computed from tensors the trainer already has (:func:`behaviour`), so the test can
check it on a hand-made batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLE_KIND_INDEX, ROLES, Kind
from hospital_marl.core.constants import CRITICAL_SEVERITY

ACTION_TYPES: dict[str, tuple[str, Kind]] = {
    "icu_triage": ("triage", Kind.ADMIT_ICU),
    "general_triage": ("triage", Kind.ADMIT_GENERAL),
    "transfer": ("bed_manager", Kind.TRANSFER_ICU),
    "icu_discharge": ("bed_manager", Kind.DISCHARGE_ICU),
    "early_discharge": ("bed_manager", Kind.EARLY_DISCHARGE),
    "ventilate": ("ventilator_officer", Kind.VENTILATE),
}
"""The action types followed: name -> (role, kind)."""
DIAGNOSTIC_FILE = "behaviour.jsonl"
"""Where a run writes one line per update: ``{"update", "frames", "types", "value_rmse", "table"}``."""
RARE_TYPES = ("icu_triage", "transfer", "icu_discharge", "ventilate")
"""The ICU-side types (value error is also reported on the ticks where none of them is valid)."""


def type_columns(name: str) -> tuple[int, torch.Tensor]:
    """Type ``name``'s role (index in :data:`ROLES`) and its actions' indices in that role's space."""
    role, kind = ACTION_TYPES[name]
    cols = [a for a in range(ROLE_ACTION_COUNTS[role]) if ROLE_KIND_INDEX[role][a][0] == kind]
    return ROLES.index(role), torch.tensor(cols, dtype=torch.long)


def kind_matrix(role: str) -> torch.Tensor:
    """``(n_role, n_kinds)`` one-hot of each of ``role``'s actions' kind (the no-op its own kind):
    ``probs @ kind_matrix(role)`` is the policy's distribution over action types."""
    kinds = sorted({kind for kind, _ in ROLE_KIND_INDEX[role]})
    out = torch.zeros(ROLE_ACTION_COUNTS[role], len(kinds))
    for a, (kind, _) in enumerate(ROLE_KIND_INDEX[role]):
        out[a, kinds.index(kind)] = 1.0
    return out


def type_entropy(logits: torch.Tensor, role: str) -> torch.Tensor:
    """``(N,)`` entropy of the policy's action-type distribution (masked logits ``(N, n_role)``): a
    bonus on it keeps probability on every valid type (a rare one included) without flattening the
    choice among the actions of one type, which the plain entropy bonus mostly spends on."""
    probs = torch.softmax(logits, dim=-1) @ kind_matrix(role).to(logits.device)
    return -(probs * torch.log(probs.clamp_min(1e-12))).sum(-1)


def _mean(x: torch.Tensor) -> float | None:
    return round(float(x.float().mean()), 6) if x.numel() else None


def behaviour(
    probs: Mapping[str, torch.Tensor],
    masks: Mapping[str, torch.Tensor],
    actions: torch.Tensor,
    advantages: torch.Tensor,
    values: torch.Tensor,
    returns: torch.Tensor,
    finished: Sequence[Mapping[str, float]] = (),
    queue_severity: torch.Tensor | None = None,
) -> dict[str, Any]:
    """The diagnostic of one rollout, flattened to ``N`` role decisions per role.

    Args:
        probs: role -> ``(N, n_role)`` action probabilities of the collecting policy (masked ones 0).
        masks: role -> ``(N, n_role)`` bool, the mask each role acted on.
        actions: ``(N, 3)`` the actions taken (roles in :data:`ROLES` order).
        advantages, values, returns: ``(N,)`` (one team critic) or ``(N, 3)`` (one per role).
        finished: the counters of the days that ended in the rollout (``critical_total``,
            ``critical_deaths``).
        queue_severity: ``(N, 10)`` the severity of each waiting-queue slot triage saw (0: empty):
            splits the admissions by whether the patient was critical (severity >= 4), since an
            ICU admission helps a critical patient and wastes a scarce bed on another.
    """
    per_role = advantages.dim() == 2
    out: dict[str, Any] = {"types": {}, "value_rmse": {}}
    none_rare = torch.ones(actions.shape[0], dtype=torch.bool)
    for name in ACTION_TYPES:
        r, cols = type_columns(name)
        role = ROLES[r]
        valid = masks[role][:, cols].any(dim=1)
        taken = torch.isin(actions[:, r], cols)
        adv = advantages[:, r] if per_role else advantages
        err = (returns - values)[:, r] if per_role else returns - values
        if name in RARE_TYPES:
            none_rare &= ~valid
        out["types"][name] = {
            "valid": int(valid.sum()),
            "taken": int(taken.sum()),
            "p_where_valid": _mean(probs[role][valid][:, cols].sum(dim=1)),
            "taken_where_valid": _mean(taken[valid]),
            "adv_taken": _mean(adv[taken]),
            "adv_not_taken_where_valid": _mean(adv[valid & ~taken]),
        }
        out["value_rmse"][name] = _mean(err[valid] ** 2)
        if out["value_rmse"][name] is not None:
            out["value_rmse"][name] = round(out["value_rmse"][name] ** 0.5, 6)
    if queue_severity is not None:
        triage_adv = advantages[:, 0] if per_role else advantages
        split = _triage_split(probs["triage"], masks["triage"], actions[:, 0], triage_adv, queue_severity)
        out["triage_by_severity"] = split
    err_all = returns - values
    err_none = err_all[none_rare] if not per_role else err_all[none_rare].flatten()
    rmse_none = _mean(err_none**2)
    out["value_rmse"]["no_rare_type_valid"] = None if rmse_none is None else round(rmse_none**0.5, 6)
    out["value_rmse"]["all"] = round(float((err_all**2).mean()) ** 0.5, 6)
    types = out["types"]
    critical = sum(float(day["critical_total"]) for day in finished)
    deaths = sum(float(day["critical_deaths"]) for day in finished)
    out["table"] = {
        "icu_admissions": types["icu_triage"]["taken"],
        "step_downs": types["icu_discharge"]["taken"],
        "transfers": types["transfer"]["taken"],
        "ventilations": types["ventilate"]["taken"],
        "ventilation_possible": types["ventilate"]["valid"],
        "critical_survival": round(1.0 - deaths / critical, 6) if critical else None,
        "days": len(finished),
    }
    return out


def _triage_split(
    probs: torch.Tensor, mask: torch.Tensor, action: torch.Tensor, adv: torch.Tensor, severity: torch.Tensor
) -> dict[str, Any]:
    """Triage's admissions split by kind (ICU / general) and by whether the admitted patient was
    critical: how often each was taken and its mean advantage; and, where an ICU admission of a
    critical patient was valid, the probability the policy gave to one."""
    _, icu = type_columns("icu_triage")
    _, general = type_columns("general_triage")
    critical = severity >= CRITICAL_SEVERITY  # (N, 10) slot k <-> ICU action icu[k], general[k]
    out: dict[str, Any] = {}
    for kind, cols in (("icu", icu), ("general", general)):
        slot = (action.unsqueeze(1) == cols.unsqueeze(0)).float().argmax(dim=1)
        taken = torch.isin(action, cols)
        crit = critical.gather(1, slot.unsqueeze(1)).squeeze(1)
        for label, which in (("critical", taken & crit), ("non_critical", taken & ~crit)):
            out[f"{kind}_{label}"] = {"taken": int(which.sum()), "adv_taken": _mean(adv[which])}
    icu_valid_critical = mask[:, icu] & critical
    where = icu_valid_critical.any(dim=1)
    mass = (probs[:, icu] * icu_valid_critical.float()).sum(dim=1)
    out["p_icu_for_a_critical_where_valid"] = _mean(mass[where])
    out["states_with_icu_for_a_critical_valid"] = int(where.sum())
    return out


def table_markdown(rows: Mapping[str, Mapping[str, Any]]) -> str:
    """Behaviour tables side by side (column name -> :func:`behaviour`'s ``table``), as issue #40's."""
    names = list(rows)
    lines = ["| behaviour | " + " | ".join(f"`{n}`" for n in names) + " |", "|---" * (len(names) + 1) + "|"]

    def cell(t: Mapping[str, Any], key: str) -> str:
        if key == "ventilate":
            return f"{t['ventilations']} of {t['ventilation_possible']}"
        value = t[key]
        return "—" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))

    for label, key in (
        ("ICU admissions (triage)", "icu_admissions"),
        ("ICU discharges (step-downs)", "step_downs"),
        ("bed-manager transfers", "transfers"),
        ("ventilates when it can", "ventilate"),
        ("critical-patient survival", "critical_survival"),
    ):
        lines.append(f"| {label} | " + " | ".join(cell(rows[n], key) for n in names) + " |")
    return "\n".join(lines)


def critical_counts(final_info: Mapping[str, Any]) -> list[dict[str, float]]:
    """The finished days' critical counters from a vector env's ``infos["final_info"]``."""
    counters, present = final_info["counters"], np.asarray(final_info["_counters"], bool)
    return [
        {key: float(counters[key][e]) for key in ("critical_total", "critical_deaths")}
        for e in np.flatnonzero(present)
    ]


__all__ = [
    "ACTION_TYPES",
    "DIAGNOSTIC_FILE",
    "RARE_TYPES",
    "behaviour",
    "critical_counts",
    "kind_matrix",
    "table_markdown",
    "type_columns",
    "type_entropy",
]
