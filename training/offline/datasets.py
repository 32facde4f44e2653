"""Minari datasets of the hospital: recorded locally from a :class:`~training.offline.behaviours.Behaviour`.

A dataset ``hospital_marl/<scenario>-<track>-<behaviour>-v0`` (Minari's ``namespace/name-vN``) holds
whole episodes of the composed env (``flat``: ``hospital_marl/HospitalED-v0``, ``Discrete(39)``) or
the team env (``team``: ``hospital_marl/HospitalEDTeam-v0``, ``MultiDiscrete([21, 16, 4])``), with
``observation_format="dict_1d"`` (every block 1-D). ``minari.load_dataset(id)`` reads it and
``recover_environment()`` makes that env again (its id, scenario and format are the dataset's env spec).

Each episode's ``infos`` are aligned with its observations (``T + 1`` rows for ``T`` steps):
``action_mask`` (of the flat env: 39; team: the 41 role columns), ``tick``, ``invalid_actions``,
``conflicts`` (the episode's counters, as the env reports them), ``outcome`` (the previous step's;
team: one per role), and ``behaviour_prob``: the behaviour's probability of ``actions[t]`` in
``observations[t]`` (the last row, after the last action, is NaN). The dataset's metadata
(``hospital_marl`` key) records the behaviour, its graded score (given by the caller: the training
layer does not grade), the command, the package version, the scenario, the observation format, the
seed and a SHA-256 of the data file: :func:`load` refuses a dataset made by another package version,
for another scenario or observation format (one line naming the difference), or whose data file
changed (a corrupted file is an error, never a partial load).

Recording steps B envs at once (:class:`~hospital_marl.envs.vector.HospitalEDVectorEnv`): every env
plays ``ceil(episodes / B)`` whole episodes and the episodes are kept in (round, env) order, so a
dataset does not favour short (early-terminated) episodes and the same arguments give the same file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import hospital_marl
from hospital_marl.core.hospital import Seal
from hospital_marl.core.scenarios import resolve_scenario
from hospital_marl.envs.infos import OUTCOME_NAMES
from hospital_marl.envs.observations import BLOCKS
from policies.base import policy_seed
from training.offline.behaviours import Behaviour, state_vector

NAMESPACE = "hospital_marl"
OBSERVATION_FORMAT = "dict_1d"
ENV_IDS = {"flat": hospital_marl.COMPOSED_ENV_ID, "team": hospital_marl.TEAM_ENV_ID}
META_KEY = "hospital_marl"


class DatasetMismatchError(ValueError):
    """The dataset was recorded for something else (package version, scenario, observation format)."""


class DatasetCorruptError(OSError):
    """The dataset's data file is not the one recorded (checksum, size or readability)."""


def dataset_id(scenario: str, track: str, behaviour: Behaviour | str, version: int = 0) -> str:
    """``hospital_marl/<scenario>-<track>-<behaviour>-v<version>`` (Minari's id convention)."""
    slug = behaviour.slug if isinstance(behaviour, Behaviour) else behaviour
    return f"{NAMESPACE}/{scenario}-{track}-{slug}-v{version}"


@dataclass
class Recording:
    """Episodes as Minari episode buffers, and what recording them cost."""

    episodes: list[Any]
    steps: int
    seconds: float
    env_steps: int  # every env step taken (rows keep stepping until every row finished its rounds)


def _space_keys(space: gym.spaces.Dict) -> list[tuple[str, int]]:
    return [(key, int(np.prod(sub.shape))) for key, sub in space.spaces.items()]


def record(
    behaviour: Behaviour,
    scenario: str,
    episodes: int,
    seed: int,
    num_envs: int = 256,
    threads: int | None = None,
) -> Recording:
    """Play ``episodes`` whole episodes of ``behaviour`` (batched, ``num_envs`` at once; days from
    ``seed``: env ``i`` starts from the scalar env's ``reset(seed=seed + i)``) as Minari buffers."""
    from minari.data_collector import EpisodeBuffer

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    b = max(1, min(num_envs, episodes))
    rounds = math.ceil(episodes / b)
    team = behaviour.track == "team"
    env = gym.make_vec(
        ENV_IDS[behaviour.track],
        num_envs=b,
        scenario=scenario,
        observation_format=OBSERVATION_FORMAT,
        threads=threads,
        autoreset_mode="same_step",  # an ended row's last observation is read from final_obs
    )
    keys = _space_keys(env.single_observation_space)
    width = sum(size for _, size in keys)
    n_mask = 41 if team else 39
    act_shape = (3,) if team else ()
    start = time.perf_counter()
    obs, info = env.reset(seed=seed)
    # Rows per env: one shift (the env truncates at its max ticks). Sized to the shift, not to a
    # generous cap: a buffer touched for the first time costs page faults, which at B = 1024 were
    # most of the recording's time when every env had 512 rows.
    cap = int(env.unwrapped.episode_counters()["max_ticks"].max()) + 1
    buf = {
        "obs": np.zeros((b, cap + 1, width), np.float32),
        "mask": np.zeros((b, cap + 1, n_mask), np.bool_),
        "outcome": np.zeros((b, cap + 1, *act_shape), np.int64),
        "act": np.zeros((b, cap, *act_shape), np.int64),
        "prob": np.full((b, cap + 1), np.nan),
        "rew": np.zeros((b, cap), np.float64),
        **{k: np.zeros((b, cap + 1), np.int64) for k in ("tick", "invalid_actions", "conflicts")},
    }
    ints = ("tick", "invalid_actions", "conflicts")
    rng = np.random.default_rng([seed, 0xB0])
    rows = np.arange(b)
    ptr = np.zeros(b, np.int64)
    finished = np.zeros(b, np.int64)
    kept: dict[tuple[int, int], Any] = {}

    def flat(obs: dict) -> np.ndarray:
        """The (B, width) observation block of a batched observation (once per step)."""
        return np.concatenate([np.asarray(obs[k]).reshape(b, -1) for k, _ in keys], 1)

    def write(where: np.ndarray, at: np.ndarray, block: np.ndarray, info: dict) -> None:
        buf["obs"][where, at] = block[where]
        buf["mask"][where, at] = info["action_mask"][where]
        for k in ints:
            buf[k][where, at] = info[k][where]
        buf["outcome"][where, at] = info["outcome"][where]

    write(rows, ptr, flat(obs), info)
    env_steps = 0
    try:
        while (finished < rounds).any():
            state = state_vector(obs)
            actions, probs = behaviour.sample(state, env.unwrapped.flat_masks(), rng)
            if ptr.max() >= cap:
                raise RuntimeError(f"an episode ran past the env's {cap - 1} ticks")
            buf["act"][rows, ptr] = actions
            buf["prob"][rows, ptr] = probs
            obs, reward, terminated, truncated, info = env.step(actions)
            env_steps += b
            buf["rew"][rows, ptr] = reward
            ptr += 1
            block = flat(obs)
            ended = terminated | truncated
            write(rows[~ended], ptr[~ended], block, info)
            done = np.flatnonzero(ended)
            if not len(done):
                continue
            # the ended rows, in bulk: their last observation (from final_obs), then the next
            # episode's first one (what the same-step autoreset returned) at row 0
            t = ptr[done]
            final_obs, final = info["final_obs"], info["final_info"]
            buf["obs"][done, t] = np.stack([_flat_row(final_obs[e], keys) for e in done.tolist()])
            buf["mask"][done, t] = False  # the episode is over: nothing is valid after it
            buf["tick"][done, t] = t
            for k in ("invalid_actions", "conflicts"):
                buf[k][done, t] = (final["counters"][k] if "counters" in final else info[k])[done]
            buf["outcome"][done, t] = info["outcome"][done]
            for e in done[finished[done] < rounds].tolist():
                kept[(int(finished[e]), e)] = _episode(
                    EpisodeBuffer,
                    e,
                    int(ptr[e]),
                    keys,
                    buf,
                    bool(terminated[e]),
                    bool(truncated[e]),
                    seed + e if finished[e] == 0 else None,
                )
            finished[done] += 1
            ptr[done] = 0
            buf["prob"][done] = np.nan
            write(done, ptr[done], block, info)
    finally:
        env.close()
    order = sorted(kept)[:episodes]
    buffers = [dataclasses.replace(kept[key], id=i) for i, key in enumerate(order)]
    steps = sum(len(buf.rewards) for buf in buffers)
    return Recording(buffers, steps, time.perf_counter() - start, env_steps)


def record_policy(policy: Any, scenario: str, episodes: int, seed: int, track: str = "flat") -> Recording:
    """Play a package policy (e.g. the ``planner``, which plans on the simulator) one scalar env at a
    time, episode ``i`` from ``reset(seed=seed + i)``, as Minari buffers. Its action probabilities
    are unknown to the recorder: ``behaviour_prob`` is NaN (importance sampling cannot use such a
    dataset; fitted-Q evaluation can)."""
    from minari.data_collector import EpisodeBuffer

    if track != "flat":
        raise ValueError("record_policy plays the flat track (the composed env)")
    keys = _space_keys(gym.make(ENV_IDS[track], scenario=scenario, observation_format=OBSERVATION_FORMAT)
                       .observation_space)  # fmt: skip
    start, buffers = time.perf_counter(), []
    for i in range(episodes):
        env = gym.make(ENV_IDS[track], scenario=scenario)  # the Dict layout the policies read
        obs, info = env.reset(seed=seed + i)
        seal = Seal(env.unwrapped.hospital)
        policy.reset(seed=policy_seed(seed + i), hospital=seal.handle)
        rows, masks, actions, rewards = [_flat_row(obs, keys)], [info["action_mask"]], [], []
        ints = {k: [info.get(k, 0)] for k in ("tick", "invalid_actions", "conflicts")}
        outcomes = [_OUTCOME_CODE["noop"]]
        done = terminated = False
        while not done:
            seal.refresh()
            action = int(policy.act(obs, info["action_mask"]))
            obs, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            rows.append(_flat_row(obs, keys))
            masks.append(info["action_mask"] if not done else np.zeros_like(masks[0]))
            actions.append(action)
            rewards.append(reward)
            counters = env.unwrapped.hospital.counters.as_dict()
            ints["tick"].append(info["tick"])
            ints["invalid_actions"].append(counters["invalid_actions"])
            ints["conflicts"].append(counters["conflicts"])
            outcomes.append(_OUTCOME_CODE.get(info.get("outcome"), 0))
        env.close()
        obs_block = np.stack(rows)
        observations, at = {}, 0
        for key, size in keys:
            observations[key] = obs_block[:, at : at + size].copy()
            at += size
        n = len(actions)
        terminations, truncations = np.zeros(n, bool), np.zeros(n, bool)
        terminations[-1], truncations[-1] = bool(terminated), not terminated
        buffers.append(
            EpisodeBuffer(
                id=i,
                seed=seed + i,
                observations=observations,
                actions=np.asarray(actions, np.int64),
                rewards=np.asarray(rewards, np.float64),
                terminations=terminations,
                truncations=truncations,
                infos={
                    "action_mask": np.asarray(masks, bool),
                    **{k: np.asarray(v, np.int64) for k, v in ints.items()},
                    "outcome": np.asarray(outcomes, np.int64),
                    "behaviour_prob": np.full(n + 1, np.nan),
                },
            )
        )
    steps = sum(len(b.rewards) for b in buffers)
    return Recording(buffers, steps, time.perf_counter() - start, steps)


def _flat_row(obs: Any, keys: list[tuple[str, int]]) -> np.ndarray:
    return np.concatenate([np.asarray(obs[k], np.float32).ravel() for k, _ in keys])


def _outcome_codes() -> dict[str, int]:

    return {name: code for code, name in enumerate(OUTCOME_NAMES)}


_OUTCOME_CODE = _outcome_codes()


def _episode(EpisodeBuffer, e, t, keys, buf, terminated, truncated, seed):  # fmt: skip
    """Env ``e``'s episode of ``t`` steps, copied out of the recording buffers."""
    obs = buf["obs"][e, : t + 1]
    observations, start = {}, 0
    for key, size in keys:
        observations[key] = obs[:, start : start + size].copy()
        start += size
    infos = {
        "action_mask": buf["mask"][e, : t + 1].copy(),
        **{k: buf[k][e, : t + 1].copy() for k in ("tick", "invalid_actions", "conflicts")},
        "outcome": buf["outcome"][e, : t + 1].copy(),
        "behaviour_prob": buf["prob"][e, : t + 1].copy(),
    }
    terminations = np.zeros(t, bool)
    truncations = np.zeros(t, bool)
    terminations[-1], truncations[-1] = terminated, truncated
    return EpisodeBuffer(
        seed=seed,
        observations=observations,
        actions=buf["act"][e, :t].copy(),
        rewards=buf["rew"][e, :t].copy(),
        terminations=terminations,
        truncations=truncations,
        infos=infos,
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def data_file(dataset: Any) -> Path:
    """The dataset's HDF5 file."""
    return Path(dataset.storage.data_path) / "main_data.hdf5"


def create(
    behaviour: Behaviour | str,
    scenario: str,
    episodes: int,
    seed: int,
    *,
    graded_score: float | None = None,
    graded: dict[str, Any] | None = None,
    command: str = "",
    num_envs: int = 256,
    threads: int | None = None,
    version: int = 0,
    policy: Any = None,
) -> tuple[Any, Recording]:
    """Record and write one Minari dataset (locally, under ``MINARI_DATASETS_PATH`` or
    ``~/.minari/datasets``). ``graded_score`` / ``graded``: the behaviour's score by the package's
    grader and how it was graded (the caller grades: see ``hospital-marl datasets create``).
    ``policy``: a package policy to play instead (``behaviour`` is then its name, flat track:
    :func:`record_policy`)."""
    import minari

    resolve_scenario(scenario)  # a clear error for an unknown scenario before any work
    if policy is not None:
        track, label, components, deterministic = "flat", str(behaviour), [[str(behaviour), 1.0]], False
        recording = record_policy(policy, scenario, episodes, seed, track)
    else:
        assert isinstance(behaviour, Behaviour)
        track, label = behaviour.track, behaviour.name
        components, deterministic = [list(c) for c in behaviour.components], behaviour.deterministic
        recording = record(behaviour, scenario, episodes, seed, num_envs, threads)
    name = dataset_id(scenario, track, behaviour, version)
    env_spec = gym.spec(ENV_IDS[track])
    env = gym.make(env_spec, scenario=scenario, observation_format=OBSERVATION_FORMAT)
    dataset = minari.create_dataset_from_buffers(
        dataset_id=name,
        buffer=recording.episodes,
        env=env.spec,
        eval_env=env.spec,
        algorithm_name=label,
        author="hospital_marl",
        author_email="https://github.com/hospital-marl (issues)",
        code_permalink="hospital_marl: training/offline/datasets.py",
        description=(
            f"{label} on the {scenario} scenario, {track} track "
            f"({env_spec.id}, observation_format={OBSERVATION_FORMAT}): {episodes} episodes."
        ),
        data_format="hdf5",
        requirements=[f"hospital-marl=={hospital_marl.__version__}"],
    )
    env.close()
    dataset.storage.update_metadata(
        {
            META_KEY: {
                "behaviour": label,
                "behaviour_components": components,
                "deterministic": deterministic,
                "behaviour_probabilities": policy is None,
                "graded_score": graded_score,
                "graded": graded or {},
                "command": command,
                "package_version": hospital_marl.__version__,
                "scenario": scenario,
                "track": track,
                "env_id": env_spec.id,
                "observation_format": OBSERVATION_FORMAT,
                "seed": seed,
                "episodes": len(recording.episodes),
                "steps": recording.steps,
                "record_seconds": recording.seconds,
                "sha256": _sha256(data_file(dataset)),
            }
        }
    )
    return dataset, recording


def load(
    name: str,
    *,
    scenario: str | None = None,
    observation_format: str = OBSERVATION_FORMAT,
    package_version: str | None = None,
) -> Any:
    """``minari.load_dataset(name)``, refused when it does not fit: another package version (default:
    this one), another ``scenario`` (when given) or observation format (:class:`DatasetMismatchError`,
    one line naming the difference); a data file that is not the one recorded
    (:class:`DatasetCorruptError`)."""
    import minari

    try:
        dataset = minari.load_dataset(name)
    except FileNotFoundError:
        raise
    except Exception as exc:  # an unreadable metadata or data file
        raise DatasetCorruptError(f"dataset {name} cannot be read: {type(exc).__name__}: {exc}") from exc
    meta = dataset.storage.metadata.get(META_KEY)
    if not isinstance(meta, dict):
        raise DatasetMismatchError(f"dataset {name} was not recorded by hospital-marl (no {META_KEY} key)")
    expected = {
        "package_version": package_version or hospital_marl.__version__,
        "observation_format": observation_format,
    }
    if scenario is not None:
        expected["scenario"] = scenario
    for key, want in expected.items():
        if meta.get(key) != want:
            raise DatasetMismatchError(
                f"dataset {name} was recorded with {key} {meta.get(key)!r}, expected {want!r}"
            )
    path = data_file(dataset)
    if not path.is_file() or _sha256(path) != meta.get("sha256"):
        raise DatasetCorruptError(f"dataset {name}: {path} is not the file recorded (checksum differs)")
    return dataset


@dataclass
class Transitions:
    """A dataset as flat arrays (steps of every episode, in order) for learners and estimators.

    ``states`` (N, 106+) float32: the global state vector (the blocks in the kernel's layout, what
    the behaviours' rules read), then any presence blocks (the ``train`` split's ``masked`` layout);
    ``next_states``; ``actions`` (N,) or (N, 3); ``rewards``; ``dones`` (the episode ended after
    this step); ``masks``, ``next_masks`` (flat masks, 39); ``behaviour_prob``; ``episode``,
    ``t`` (the step's episode and index in it)."""

    states: np.ndarray
    next_states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    masks: np.ndarray
    next_masks: np.ndarray
    behaviour_prob: np.ndarray
    episode: np.ndarray
    t: np.ndarray
    keys: Sequence[str]


def transitions(dataset: Any, episodes: int | None = None) -> Transitions:
    """Every step of a dataset as :class:`Transitions` (of its first ``episodes`` episodes if given:
    a smaller, stated scale for a run on a busy machine)."""
    blocks = [b.key for b in BLOCKS]
    keys = blocks + [k for k in dataset.observation_space.spaces if k not in blocks]  # + presence
    parts: dict[str, list[np.ndarray]] = {k: [] for k in Transitions.__dataclass_fields__ if k != "keys"}
    which = None if episodes is None else range(min(episodes, dataset.total_episodes))
    for i, ep in enumerate(dataset.iterate_episodes(which)):
        obs = np.concatenate([np.asarray(ep.observations[k], np.float32) for k in keys], axis=1)
        n = len(ep.rewards)
        parts["states"].append(obs[:-1])
        parts["next_states"].append(obs[1:])
        parts["actions"].append(np.asarray(ep.actions))
        parts["rewards"].append(np.asarray(ep.rewards, np.float64))
        done = np.zeros(n, bool)
        done[-1] = True
        parts["dones"].append(done)
        mask = np.asarray(ep.infos["action_mask"], bool)
        parts["masks"].append(mask[:-1])
        parts["next_masks"].append(mask[1:])
        parts["behaviour_prob"].append(np.asarray(ep.infos["behaviour_prob"])[:-1])
        parts["episode"].append(np.full(n, i))
        parts["t"].append(np.arange(n))
    return Transitions(**{k: np.concatenate(v) for k, v in parts.items()}, keys=keys)


__all__ = [
    "ENV_IDS",
    "NAMESPACE",
    "OBSERVATION_FORMAT",
    "DatasetCorruptError",
    "DatasetMismatchError",
    "Recording",
    "Transitions",
    "create",
    "data_file",
    "dataset_id",
    "load",
    "record",
    "transitions",
]
