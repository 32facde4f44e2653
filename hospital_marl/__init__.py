"""hospital_marl: emergency-department resource allocation as a multi-agent RL benchmark.

Views of one simulation core (:class:`hospital_marl.core.Hospital`):

- :func:`env` / :func:`raw_env` — PettingZoo AEC, roles ``triage → bed_manager → ventilator_officer``;
- :func:`parallel_env` — PettingZoo parallel, simultaneous role actions;
- ``gymnasium.make("hospital_marl/HospitalED-v0", scenario=...)`` — one masked ``Discrete(39)`` per tick;
- ``gymnasium.make("hospital_marl/HospitalEDTeam-v0", scenario=...)`` — ``MultiDiscrete([21, 16, 4])``;
- ``gymnasium.make_vec(<either id>, num_envs=B)`` — B envs batched in one kernel call
  (:mod:`hospital_marl.envs.vector`, also the multi-agent ``HospitalMARLVectorEnv``).

The second environment, radiotherapy planning, lives in :mod:`hospital_marl.radiotherapy`
(``gymnasium.make("hospital_marl/RadiotherapyPlanning-v0", task="prostate")``).
"""

from __future__ import annotations

import gymnasium

from hospital_marl.core import (
    ACTION_TABLE,
    BUILTIN_SCENARIOS,
    CONDITIONS,
    DISTRIBUTIONS,
    N_FLAT_ACTIONS,
    ROLE_ACTION_COUNTS,
    ROLES,
    SCENARIOS,
    SPLITS,
    Burst,
    ClinicalParams,
    Hospital,
    Outage,
    RewardTable,
    Scenario,
    ScenarioDistribution,
    composite_score,
    flat_to_joint,
    flat_to_role,
    get_scenario,
    register_distribution,
    register_scenario,
    resolve_scenario,
    role_to_flat,
)
from hospital_marl.envs.aec import HospitalAECEnv, env, raw_env
from hospital_marl.envs.composed import HospitalEDEnv, HospitalEDTeamEnv
from hospital_marl.envs.parallel import HospitalParallelEnv, parallel_env

__version__ = "0.2.0"  # keep equal to pyproject.toml's version (tests/test_packaging.py checks)

COMPOSED_ENV_ID = "hospital_marl/HospitalED-v0"
TEAM_ENV_ID = "hospital_marl/HospitalEDTeam-v0"

for _id, _entry, _vector in (
    (
        COMPOSED_ENV_ID,
        "hospital_marl.envs.composed:HospitalEDEnv",
        "hospital_marl.envs.vector:make_composed_vector",
    ),
    (
        TEAM_ENV_ID,
        "hospital_marl.envs.composed:HospitalEDTeamEnv",
        "hospital_marl.envs.vector:make_team_vector",
    ),
):
    if _id not in gymnasium.registry:
        # No max_episode_steps: the env truncates itself at the end of the shift.
        # make_vec(id, num_envs=B) builds the natively batched env (next-step autoreset).
        gymnasium.register(id=_id, entry_point=_entry, vector_entry_point=_vector, disable_env_checker=False)

from hospital_marl.radiotherapy import register_envs as _register_rt_envs  # noqa: E402

_register_rt_envs()  # hospital_marl/RadiotherapyPlanning-v0 (task=...) and one id per RT task

__all__ = [
    "ACTION_TABLE",
    "BUILTIN_SCENARIOS",
    "COMPOSED_ENV_ID",
    "CONDITIONS",
    "DISTRIBUTIONS",
    "N_FLAT_ACTIONS",
    "ROLES",
    "ROLE_ACTION_COUNTS",
    "SCENARIOS",
    "SPLITS",
    "TEAM_ENV_ID",
    "Burst",
    "ClinicalParams",
    "Hospital",
    "HospitalAECEnv",
    "HospitalEDEnv",
    "HospitalEDTeamEnv",
    "HospitalParallelEnv",
    "Outage",
    "RewardTable",
    "Scenario",
    "ScenarioDistribution",
    "composite_score",
    "env",
    "flat_to_joint",
    "flat_to_role",
    "get_scenario",
    "parallel_env",
    "raw_env",
    "register_distribution",
    "register_scenario",
    "resolve_scenario",
    "role_to_flat",
]
