"""Simulation figures quoted in prose (READMEs, docstrings, help texts) agree with the package's tables.

The tables are the one source of truth (``Scenario``, ``ClinicalParams``, ``RewardTable``, the
action table, the radiotherapy action list); the prose quotes them for a reader. Each claim below
is a pattern in the text and the value the package gives; every occurrence in the repository's
documentation and source (tests excluded) must agree, and every claim must still be found (a
reworded sentence updates its claim here, so no figure silently drops out of the check). The
generated tables (``tools/readme.py``) need no claim: they are rendered from the same tables.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grading.grader import grade
from grading.radiotherapy import grade_all
from hospital_marl.core.actions import N_FLAT_ACTIONS, ROLE_ACTION_COUNTS, ROLES
from hospital_marl.core.clinical import DEFAULT_CLINICAL as C
from hospital_marl.core.hospital import Hospital
from hospital_marl.core.kernel import CRITICAL_SEVERITY, ready_for_step_down
from hospital_marl.core.metrics import SCORE_WEIGHTS, WAIT_SCALE
from hospital_marl.core.rewards import RewardTable
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS, CONDITIONS, SCENARIOS, Scenario
from hospital_marl.envs.observations import BLOCKS, state_space
from hospital_marl.envs.vector import KEYS_AHEAD
from hospital_marl.envs.wrappers import EMPTY_SHIFT_SCORE
from policies.learned import FEATURE_CLIP, SEVERITY_SCALE, TICKS_SCALE, TIE_TOLERANCE
from policies.llm import LLMConfig
from policies.marl import OBS_CLIP
from policies.planner import PlannerPolicy
from server.guards import MAX_INT_DIGITS, MAX_JSON_DEPTH
from server.models import MAX_SEED
from server.settings import ENV_VARS, ServerSettings

ROOT = Path(__file__).resolve().parents[1]
R = RewardTable()
SERVER = ServerSettings()
PLANNER = {k: p.default for k, p in inspect.signature(PlannerPolicy).parameters.items()}
DAY = Scenario(name="defaults")  # the dataclass defaults every built-in scenario starts from
WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "twelve": 12}


def _rt_actions() -> int:
    from hospital_marl.radiotherapy.core.plan import ACTIONS

    return len(ACTIONS)


def _rt(module: str) -> Any:
    return importlib.import_module(f"hospital_marl.radiotherapy.core.{module}")


def _rt_full_beams() -> tuple[float, ...]:
    """The beam counts the score's beam term pays in full (its behaviour, not its source)."""
    metrics, plan = _rt("metrics"), _rt("plan")
    full = [n for n in range(plan.MAX_BEAMS + 1) if metrics.beam_term(n) == 1.0]
    return (min(full), max(full))


def _rng_equivalence() -> tuple[float, ...]:
    """Episodes per scenario and the largest |z|, as ``docs/rng/equivalence.txt`` recorded them."""
    text = (ROOT / "docs" / "rng" / "equivalence.txt").read_text()
    episodes = re.search(r"^(\d+) episodes x", text, re.M)
    max_z = re.search(r"max \|z\| = ([\d.]+)", text)
    assert episodes and max_z, "docs/rng/equivalence.txt lacks its summary lines"
    return (int(episodes.group(1)), round(float(max_z.group(1)), 1))


def _rllib_reward_scale() -> float:
    from training.rllib.train import Args

    return Args().reward_scale


def _rllib_validation() -> tuple[float, ...]:
    from training.rllib.train import Args

    return (Args().eval_interval, Args().eval_episodes, Args().eval_seed)


def _ray_minor() -> float:
    import ray

    return float(".".join(ray.__version__.split(".")[:2]))


def _number(text: str) -> float:
    return float(WORDS.get(text, text.replace("−", "-")))


CLAIMS: dict[str, tuple[str, Callable[[], tuple[float, ...]]]] = {
    "tick length": (r"(?:tick is|tick =) ([\d.]+) min", lambda: (24 * 60 / DAY.episode_length,)),
    "shift length": (r"(\d+)-tick(?:, 24-hour| flat)? shift", lambda: (DAY.episode_length,)),
    "role turns per shift": (
        r"(\d+)-tick shift is (\d+) steps",
        lambda: (DAY.episode_length, DAY.episode_length * len(ROLES)),
    ),
    "number of roles": (r"\b(three|\d+) roles\b", lambda: (len(ROLES),)),
    "flat action count": (
        r"(?:flat|composed|one|masked|composed env's)\W{0,4}`{0,2}Discrete\((\d+)\)",
        lambda: (N_FLAT_ACTIONS,),
    ),
    "flat action ids": (r"(?:an int |`n` in |flat action \()0(?:\.\.|–)(\d+)", lambda: (N_FLAT_ACTIONS - 1,)),
    "flat mask length": (r"the (\d+)-long `action_mask`|\(1024, (\d+)\) bool", lambda: (N_FLAT_ACTIONS,)),
    "team mask length": (
        r"concatenated (\d+)-long mask|the team id gives \(B, (\d+)\)",
        lambda: (sum(ROLE_ACTION_COUNTS.values()),),
    ),
    "team mask split": (
        r"np\.split\(mask, \[(\d+), (\d+)\]\)",
        lambda: tuple(np.cumsum([ROLE_ACTION_COUNTS[r] for r in ROLES])[:-1].tolist()),
    ),
    "state size": (
        r"all (\d+) observation numbers|`state\(\)` `\(B, (\d+)\)`|``\(B, (\d+)\)`` float32 block",
        lambda: (state_space(Hospital()).shape[0],),
    ),
    "waiting queue block": (
        r"`waiting_queue` \((\d+) × (\d+)\)",
        lambda: next(b.shape for b in BLOCKS if b.key == "waiting_queue"),
    ),
    "invalid action cost": (r"does nothing, costs (−\d+) and is counted", lambda: (R.invalid_action,)),
    "arrival cycle": (r"cos\(2π\(t − peak\)/(\d+)\)", lambda: (DAY.episode_length,)),
    "graded episodes": (
        r"(\d+) scenarios × (\d+) episodes\)",
        lambda: (len(BUILTIN_SCENARIOS), inspect.signature(grade).parameters["episodes"].default),
    ),
    "score formula": (
        r"overall = (\d+)\*survival_rate\s+\+ (\d+)\*critical_patient_survival\s+"
        r"\+ (\d+)\*\(1 - min\(avg_wait_time/(\d+), 1\)\)\s+\+ (\d+)\*resource_utilization\s+"
        r"\+ (\d+)\*\(1 - invalid_action_rate\)",
        lambda: (
            *(SCORE_WEIGHTS[k] for k in ("survival_rate", "critical_patient_survival", "avg_wait_time")),
            WAIT_SCALE,
            *(SCORE_WEIGHTS[k] for k in ("resource_utilization", "invalid_action_rate")),
        ),
    ),
    "LLM agent defaults": (
        r"`--max-tokens` \((\d+)\), `--timeout` \((\d+) s per request\), `--retries` \((\d+)\)",
        lambda: (LLMConfig.max_tokens, LLMConfig.timeout_s, LLMConfig.max_retries),
    ),
    "RLlib reward scale": (
        r"`--reward-scale` \(([\d.]+)\) for learning only",
        lambda: (_rllib_reward_scale(),),
    ),
    "RLlib validation grading defaults": (
        r"`--eval-interval` iterations \((\d+)\)[\s\S]{0,300}?`--eval-episodes` \((\d+)\) episodes per "
        r"scenario from base seed `--eval-seed`\s+\((\d+)\)",
        _rllib_validation,
    ),
    "one of the flat actions": (r"one of the (\d+) actions", lambda: (N_FLAT_ACTIONS,)),
    "team action space": (
        r"MultiDiscrete\(\[(\d+), (\d+), (\d+)\]\)",
        lambda: tuple(ROLE_ACTION_COUNTS[r] for r in ROLES),
    ),
    "role action spaces": (
        r"``triage`` Discrete\((\d+)\), ``bed_manager`` Discrete\((\d+)\),\s+``ventilator_officer`` "
        r"Discrete\((\d+)\)",
        lambda: tuple(ROLE_ACTION_COUNTS[r] for r in ROLES),
    ),
    "ward size": (
        r"(\d+) general\s+beds, (\d+) ICU beds and (\d+) ventilators",
        lambda: (DAY.general_beds, DAY.icu_beds, DAY.ventilators),
    ),
    "ventilator_crisis description": (
        r"(\d+)% respiratory, mostly severity >= 3: the (\d+) ventilators bind",
        lambda: (
            round(100 * SCENARIOS["ventilator_crisis"].condition_mix[CONDITIONS.index("respiratory")], 6),
            SCENARIOS["ventilator_crisis"].ventilators,
        ),
    ),
    "observation views per buffer": (r"recycled buffers whose (\w+)\s+views", lambda: (len(BLOCKS),)),
    "vector env keys drawn ahead": (r"\((\d+) at a time, the keys the scalar", lambda: (KEYS_AHEAD,)),
    "death rates": (
        r"severity 5 dies at ([\d.]+)/tick waiting, ([\d.]+) in a bed",
        lambda: (C.death_waiting, C.death_in_bed),
    ),
    "discharge rewards": (
        r"\(\+(\d+), or \+(\d+) if ever\s+critical\)",
        lambda: (R.discharge, R.critical_discharge),
    ),
    "automatic step-down": (r"(\d+) ticks later, automatically", lambda: (C.step_down_block_ticks,)),
    "early discharge cost": (r"costs (−\d+) × severity", lambda: (R.early_discharge_per_severity,)),
    "bounce-back probability": (
        r"probability ([\d.]+) × severity|a chance of ([\d.]+) x severity",
        lambda: (C.bounce_back_per_severity,),
    ),
    "planner budget": (
        r"Budget \(defaults\): (\d+) rollouts for every candidate \+ (\d+) for the best half, horizon (\d+)",
        lambda: (PLANNER["first"], PLANNER["rollouts"] - PLANNER["first"], PLANNER["horizon"]),
    ),
    "planner futures": (r"and (\d+) imagined futures per decision", lambda: (PLANNER["rollouts"],)),
    "weaning": (r"weaned after (\d+) ticks", lambda: (C.wean_ticks,)),
    "ventilator weaning, as quoted": (r"wasted for (\d+) ticks", lambda: (C.wean_ticks,)),
    "logit ties": (r"logits within ([\d.e-]+)", lambda: (TIE_TOLERANCE,)),
    "feature scales": (
        r"severities\s+/ (\d+), ticks / (\d+), counts by a typical maximum, clipped to \[0, (\d+)\]",
        lambda: (SEVERITY_SCALE, TICKS_SCALE, FEATURE_CLIP),
    ),
    "score-reward zero": (
        r"score (?:minus |- )(\d+)|\((\d+)\): the zero of",
        lambda: (EMPTY_SHIFT_SCORE,),
    ),
    "ICU-busy bonus per shift": (
        r"ICU-busy bonus is worth up to \+(\d+) a shift",
        lambda: (round(R.icu_busy_bonus * DAY.episode_length, 6),),
    ),
    "radiotherapy actions": (
        r"\*\*Actions\*\* \(`Discrete\((\d+)\)`|``Discrete\((\d+)\)`` \(:data:`~hospital_marl\.radiotherapy"
        r"|uniform over the (\d+) actions",
        lambda: (_rt_actions(),),
    ),
    "radiotherapy action ids": (r"n in 0\.\.(\d+) from", lambda: (_rt_actions() - 1,)),
    "radiotherapy grid": (r"on a (\d+) × (\d+)\s", lambda: (_rt("phantoms").GRID,) * 2),
    "radiotherapy penumbra": (r"Gaussian penumbra \(σ = ([\d.]+) voxels\)", lambda: (_rt("dose").PENUMBRA,)),
    "radiotherapy aperture margins": (
        r"plus a margin\*\* of (\d+)–(\d+) voxels on each side \(a new\s+beam: (\d+)\)",
        lambda: (0, _rt("dose").MAX_MARGIN, _rt("plan").NEW_MARGIN),
    ),
    "radiotherapy attenuation": (r"exp\(−([\d.]+) · d\)", lambda: (_rt("dose").MU,)),
    "radiotherapy score weights": (
        r"coverage · \(([\d.]+) \+ ([\d.]+) · oar \+ ([\d.]+) · CI \+ ([\d.]+) · beams\) "
        r"· \(1 − ([\d.]+) · hot\) · \(1 − ([\d.]+) · short\)",
        lambda: tuple(
            _rt("metrics").SCORE_WEIGHTS[k] for k in ("base", "oar", "ci", "beams", "hot", "short")
        ),
    ),
    "radiotherapy hot spot": (
        r"max\(clip\(\(D2 − ([\d.]+)\) / \(([\d.]+) − ([\d.]+)\), 0, 1\),",
        lambda: (_rt("metrics").D2_GOAL, _rt("metrics").HOT_FAIL, _rt("metrics").D2_GOAL),
    ),
    "radiotherapy body hot spot": (
        r"clip\(\(B1 − ([\d.]+)\) / \(([\d.]+) − ([\d.]+)\), 0, 1\)\)",
        lambda: (_rt("metrics").BODY_GOAL, _rt("metrics").HOT_FAIL, _rt("metrics").BODY_GOAL),
    ),
    "radiotherapy cold spot": (
        r"short\s+= clip\(\(([\d.]+) − D98\) / \(([\d.]+) − ([\d.]+)\), 0, 1\)",
        lambda: (_rt("metrics").D98_GOAL, _rt("metrics").D98_GOAL, _rt("metrics").D98_MAJOR),
    ),
    "radiotherapy tiers": (
        r"\| ([\d.]+) \+ ([\d.]+) · q \| yes \|\n\| minor deviation \| only priority-2/3 constraints fail "
        r"\| ([\d.]+) \+ ([\d.]+) · q \|",
        lambda: (
            _rt("metrics").PASS_THRESHOLD,
            round(1 - _rt("metrics").PASS_THRESHOLD, 6),
            _rt("metrics").MINOR_BAND[0],
            round(_rt("metrics").MINOR_BAND[1] - _rt("metrics").MINOR_BAND[0], 6),
        ),
    ),
    "radiotherapy coverage goal": (
        r"min\(D98 / ([\d.]+), 1\)",
        lambda: (_rt("metrics").D98_GOAL,),
    ),
    "radiotherapy cap and pass mark": (
        r"capped at ([\d.]+) \(below the pass mark\s+([\d.]+)\)",
        lambda: (_rt("metrics").CRITICAL_CAP, _rt("metrics").PASS_THRESHOLD),
    ),
    "radiotherapy OAR falloff": (
        r"0 at ([\d.]+) × the limit",
        lambda: (_rt("metrics").OAR_ZERO_AT,),
    ),
    "radiotherapy minimum tumour": (r"tumour ≥ (\d+) voxels", lambda: (_rt("phantoms").MIN_TUMOUR_VOXELS,)),
    "radiotherapy calibration weight": (
        r"evenly spaced beams at weight ([\d.]+)",
        lambda: (_rt("dose").CALIBRATION_WEIGHT,),
    ),
    "radiotherapy priority weights": (
        r"priority-weighted \((\d+)/(\d+)/(\d+)\)",
        lambda: tuple(_rt("metrics").PRIORITY_WEIGHTS[p] for p in (1, 2, 3)),
    ),
    "radiotherapy full beam term": (
        r"`beams` 1 for (\d+)–(\d+) beams|= 1 for (\d+)–(\d+) beams",
        _rt_full_beams,
    ),
    "counter-based draws, equivalence run": (
        r"(\d+) episodes per scenario: every metric and counter within\s+([\d.]+) combined standard errors",
        _rng_equivalence,
    ),
    "server guards": (
        r"a (\d+)\+-digit integer\) anywhere in the body; nesting deeper than (\d+)",
        lambda: (MAX_INT_DIGITS + 1, MAX_JSON_DEPTH),
    ),
    "server frame cap": (
        r"frames over (\d+) MiB: close 1009",
        lambda: (SERVER.ws_frame_limit_bytes / 2**20,),
    ),
    "server seed range": (r"2\*\*(\d+) − 1 \(the grader's episode seeds", lambda: (math.log2(MAX_SEED + 1),)),
    "radiotherapy grading defaults": (
        r"\((\d+) patients per task, seed (\d+);|n_episodes=(\d+), seed=(\d+)\)|SPEC-RT's (\d+) episodes per "
        r"task and seed (\d+)",
        lambda: tuple(inspect.signature(grade_all).parameters[k].default for k in ("n_episodes", "seed")),
    ),
    "automatic step-down, as quoted again": (
        r"discharged automatically after (\d+) ticks is still a successful\s+discharge \(\+(\d+)/\+(\d+)\)",
        lambda: (C.step_down_block_ticks, R.discharge, R.critical_discharge),
    ),
    "grade signature": (
        r"grading\.grade\(policy, episodes=(\d+), seed=(\d+), scenarios=None",
        lambda: tuple(inspect.signature(grade).parameters[k].default for k in ("episodes", "seed")),
    ),
    "out-of-range action example": (r"\(`-1`, `(\d+)`; a role action beyond", lambda: (N_FLAT_ACTIONS,)),
    "role encoding clip": (r"fixed scales, clipped to \[0, (\d+)\]", lambda: (OBS_CLIP,)),
    "server sessions example, WebSocket and web": (
        r'"websocket": \{"active": \d+, "max": (\d+), "idle_timeout_s": ([\d.]+),[^\n]*\n'
        r'\s*"web": \{"active": \d+, "max": (\d+), "idle_timeout_s": ([\d.]+)\}',
        lambda: (SERVER.max_sessions, SERVER.idle_timeout_s, SERVER.max_web_sessions, SERVER.idle_timeout_s),
    ),
    "death on the env's reward": (r"a death is (-\d+) on\s+the env's reward", lambda: (R.death,)),
    "server sessions example": (
        r'"http": \{"active": \d+, "max": (\d+), "idle_timeout_s": ([\d.]+)\}',
        lambda: (SERVER.max_http_sessions, SERVER.http_session_ttl_s),
    ),
    "step-down severity": (
        r"treatment is done and(?: whose)? severity (?:≤|<=|is <=) (\d)",
        lambda: (max(s for s in range(1, 6) if ready_for_step_down(0, s)),),
    ),
    "adequate care in a general bed": (
        r"a general bed for\s+severity (?:≤|<=) (\d)",
        lambda: (CRITICAL_SEVERITY - 1,),
    ),
    "Ray version": (r"\bRay (\d+\.\d+) authenticates", lambda: (_ray_minor(),)),
}
"""Claim -> (pattern whose groups quote figures, the package's figures in group order)."""
for _field, _var in ENV_VARS.items():  # the defaults tables of server/README.md and server/settings.py
    if type(getattr(SERVER, _field)) in (int, float):
        CLAIMS[f"server default {_var}"] = (
            rf"`{_var}` \|[^|\n]*\| (\d+) \||``{_var}``[ \t][^\n]*?[ \t](\d+)$",
            lambda f=_field: (getattr(SERVER, f),),
        )


def documentation() -> dict[str, str]:
    """Every tracked Markdown and Python file outside tests/: path -> text."""
    files = subprocess.run(
        ["git", "ls-files", "*.md", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return {f: (ROOT / f).read_text() for f in files if not f.startswith("tests/") and (ROOT / f).is_file()}


DOCS = documentation()


@pytest.mark.parametrize("claim", sorted(CLAIMS))
def test_prose_figures__agree_with_the_package_tables(claim: str) -> None:
    pattern, expected = CLAIMS[claim]
    found = [(path, m) for path, text in DOCS.items() for m in re.finditer(pattern, text, re.M)]
    assert found, f"no text quotes the {claim} any more: update or remove its claim"
    want = expected()
    for path, match in found:
        got = tuple(_number(g) for g in match.groups() if g is not None)
        line = DOCS[path].count("\n", 0, match.start()) + 1
        assert got == want, f"{path}:{line}: {match.group(0)!r} quotes {got}, the package says {want}"
