"""The pure simulation core: no gymnasium, pettingzoo, torch or fastapi."""

from hospital_marl.core.actions import (
    ACTION_GROUPS,
    ACTION_TABLE,
    N_FLAT_ACTIONS,
    ROLE_ACTION_COUNTS,
    ROLES,
    ActionSpec,
    Kind,
    RoleAction,
    flat_to_joint,
    flat_to_role,
    role_to_flat,
)
from hospital_marl.core.clinical import DEFAULT_CLINICAL, ClinicalParams
from hospital_marl.core.generator import Day, generate_day
from hospital_marl.core.hospital import Hospital, Outcome, TickResult
from hospital_marl.core.metrics import METRIC_NAMES, EpisodeCounters, composite_score, episode_metrics
from hospital_marl.core.rewards import DEFAULT_REWARDS, RewardTable
from hospital_marl.core.scenarios import (
    BUILTIN_SCENARIOS,
    CONDITIONS,
    DISTRIBUTIONS,
    SCENARIOS,
    SPLITS,
    Burst,
    Scenario,
    ScenarioDistribution,
    get_scenario,
    register_distribution,
    register_scenario,
    resolve_scenario,
)

__all__ = [
    "ACTION_GROUPS",
    "ACTION_TABLE",
    "BUILTIN_SCENARIOS",
    "CONDITIONS",
    "DEFAULT_CLINICAL",
    "DEFAULT_REWARDS",
    "DISTRIBUTIONS",
    "METRIC_NAMES",
    "N_FLAT_ACTIONS",
    "ROLES",
    "ROLE_ACTION_COUNTS",
    "SCENARIOS",
    "SPLITS",
    "ActionSpec",
    "Burst",
    "ClinicalParams",
    "Day",
    "EpisodeCounters",
    "Hospital",
    "Kind",
    "Outcome",
    "RewardTable",
    "RoleAction",
    "Scenario",
    "ScenarioDistribution",
    "TickResult",
    "composite_score",
    "episode_metrics",
    "flat_to_joint",
    "flat_to_role",
    "generate_day",
    "get_scenario",
    "register_distribution",
    "register_scenario",
    "resolve_scenario",
    "role_to_flat",
]
