"""Warm start ("kickstarting") of ``train benchmarl``: clone ``team_heuristic``, then BenchMARL's PPO.

From scratch, MAPPO on the ED collapses onto "admit everyone to a general bed, then transfer to
the ICU" before it finds the indirect payoff of admitting critical patients straight to the ICU
and of stepping ready ICU patients down (SPEC §2 "bed blocking"). ``--warm-start team_heuristic``
starts PPO from the rules instead, in two steps run on the experiment BenchMARL built, before
``experiment.run()``:

1. :func:`collect_demonstrations` plays ``team_heuristic`` (its compiled per-role rules, through
   :meth:`policies.heuristic.HeuristicPolicy.act_role`) on the *training* env
   (:class:`~training.benchmarl.env.HospitalTorchEnv`, the trainer's seed stream: ``--seed``
   seeds env ``i``'s first day as ``reset(seed=seed + i)``, later days follow that env's own
   seed sequence). The grader's days (validation seed 1000, held-out seed) are derived by
   :func:`grading.common.episode_seed` from a different sequence and are never played here; the
   days played are listed in :attr:`Demonstrations.day_seeds`. Observations, global state and
   masks are exactly the tensors the actors and critics read in training; the rewards are the
   training reward (``--reward``, ``--reward-mode``, ``--reward-scale``, ``--reward-overrides``).
2. :func:`clone_into` fits each role's actor (BenchMARL's own MLP, the module PPO then trains)
   by masked cross-entropy on the rules' actions, and each role's critic (MAPPO: the global
   state; IPPO: the role's observation) by least squares to the demonstrations' discounted
   returns (``--gamma``), so PPO's first advantages measure deviations from the rules rather
   than a random critic's noise, which would undo the cloning in the first updates.

The trainer grades the cloned actors on validation days at frame 0 before PPO starts: that
row is in ``curve.json`` and is a candidate for ``best/`` like any other.

``--warm-start team_planner`` distils the team planner instead (:class:`policies.planner.TeamPlannerPolicy`,
which imagines futures from the episode's own simulator): step 1 is then
:func:`collect_planner_demonstrations`, the same training days played as the grader plays them
(scalar AEC env, one ``act_role`` per turn), encoded by the training env's own
:func:`~training.benchmarl.env.encode_state`; step 2 is the same :func:`clone_into`. The planner's
triage is not a function of the observation alone (its imagined futures are random draws), so
cloning cannot reach the rules' agreement there.

``--dagger-rounds N`` adds DAgger (Ross, Gordon & Bagnell, "A reduction of imitation learning and
structured prediction to no-regret online learning", 2011) with the planner as the expert
(:func:`dagger`): the cloned actors play fresh training days, the planner labels every state they
reach, and the actors are re-fitted on every round's labels. A clone trained only on the planner's
own states meets states the planner never steers to once it deviates (a triage error fills a bed
the planner would have kept free); DAgger puts those states, with the planner's answer, in the data.
The ``imitation`` library's DAgger drives one SB3 policy in a Gymnasium env; here the learners are
BenchMARL's per-role actors and the expert needs the scalar AEC env's hospital, so the loop is
:func:`collect_planner_demonstrations` with a student, and :func:`clone_into`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from hospital_marl.core.actions import ROLES
from hospital_marl.core.scenarios import get_scenario
from hospital_marl.envs._common import EpisodeSeeder
from hospital_marl.envs.aec import HospitalAECEnv
from hospital_marl.envs.observations import ROLE_INDEX
from policies.base import policy_seed
from policies.heuristic import TeamHeuristicPolicy
from policies.marl import encode_state
from policies.planner import TeamPlannerPolicy
from training.benchmarl.actors import actor_logits, actor_nets, actor_td
from training.benchmarl.args import WARM_STARTS, Args
from training.common import reward_table

if TYPE_CHECKING:
    import torch

CLONE_MINIBATCH = 128
"""States per cloning step: small enough for ~200 Adam steps per epoch over 256 days of demonstrations."""


@dataclass
class Demonstrations:
    """The team heuristic's play on training days, as the learners see it (one row per tick and env).

    ``observations[role]`` (N, d_role) float32 and ``masks[role]`` (N, n_role) bool are the actor's
    inputs; ``state`` (N, 106) the centralised critic's; ``actions[role]`` (N,) the rules' choices;
    ``returns[role]`` (N,) the discounted training return from that tick to the day's end.
    """

    observations: dict[str, torch.Tensor]
    masks: dict[str, torch.Tensor]
    actions: dict[str, torch.Tensor]
    state: torch.Tensor
    returns: dict[str, torch.Tensor]
    day_seeds: list[int] = field(default_factory=list)
    """The seed of every day played, the one cut off at the end included (the scalar env's
    ``reset(seed=...)`` that gives the same day)."""
    days: int = 0
    """Whole days kept (a day ended early by the ED's closure counts as whole)."""
    student_actions: dict[str, torch.Tensor] | None = None
    """DAgger rounds: what the student would have played at each row (``actions`` are the labels)."""

    def __len__(self) -> int:
        return int(self.state.shape[0])


def training_day_seeds(seed: int, days_per_env: list[int], skip: list[int] | None = None) -> list[int]:
    """The seeds of the days ``HospitalTorchEnv(len(days_per_env), seed=seed)`` plays, ``days_per_env[i]``
    days in env ``i``: env ``i`` starts with ``seed + i``, then its own seed sequence (the env's
    :class:`~hospital_marl.envs._common.EpisodeSeeder`, as the vector env draws it). ``skip[i]``:
    env ``i``'s first days left out (those a previous DAgger round played)."""
    skip = skip or [0] * len(days_per_env)
    seeds = []
    for i, (days, skipped) in enumerate(zip(days_per_env, skip)):
        seeder = EpisodeSeeder()
        row = [seeder(seed + i) if d == 0 else seeder(None) for d in range(skipped + days)]
        seeds.extend(row[skipped:])
    return seeds


def days_per_row(days: int, n_envs: int) -> list[int]:
    """``days`` spread over ``n_envs`` training rows in turn (the first ``days % n_envs`` get one more)."""
    return [days // n_envs + (r < days % n_envs) for r in range(n_envs)]


def collect_demonstrations(args: Args, days: int) -> Demonstrations:
    """Play ``team_heuristic`` for ``days`` days' worth of ticks on the training envs (whole batches of
    ``args.n_envs`` x a day's ticks), keeping each env's whole days."""
    import torch

    from training.benchmarl.env import HospitalTorchEnv

    env = HospitalTorchEnv(
        num_envs=args.n_envs,
        scenarios=args.scenarios,
        seed=args.seed,
        reward_mode=args.reward_mode,
        reward_scale=args.reward_scale,
        rewards=reward_table(args.reward_overrides),
        reward=args.reward,
    )
    ticks = max(get_scenario(s).episode_length for s in args.scenarios)
    rounds = -(-days // args.n_envs)
    rules = TeamHeuristicPolicy()
    obs: dict[str, list[torch.Tensor]] = {role: [] for role in ROLES}
    masks: dict[str, list[torch.Tensor]] = {role: [] for role in ROLES}
    actions: dict[str, list[torch.Tensor]] = {role: [] for role in ROLES}
    rewards: dict[str, list[torch.Tensor]] = {role: [] for role in ROLES}
    states, dones = [], []
    td = env.reset()
    for _ in range(rounds * ticks):
        raw = np.concatenate([vec.state_vectors for vec in env.vecs])  # the state td encodes
        for role in ROLES:
            mask = td.get((role, "action_mask"))[:, 0]
            view = raw[:, ROLE_INDEX[role]]
            chosen = [rules.act_role(role, view[e], mask[e].numpy()) for e in range(view.shape[0])]
            td.set((role, "action"), torch.tensor(chosen, dtype=torch.int64).unsqueeze(1))
            obs[role].append(td.get((role, "observation"))[:, 0])
            masks[role].append(mask)
            actions[role].append(td.get((role, "action"))[:, 0])
        states.append(td.get("state"))
        td, td_next = env.step_and_maybe_reset(td)
        for role in ROLES:
            rewards[role].append(td.get(("next", role, "reward")).reshape(-1))
        dones.append(td.get(("next", "done")).reshape(-1))
        td = td_next
    done = torch.stack(dones)  # (T, B)
    returns = {role: _discounted(torch.stack(rewards[role]), done, args.gamma) for role in ROLES}
    # A day can end early (SPEC: the ED is closed), so rows finish days at different ticks: keep
    # each row's whole days only (a day cut off at the end would have a truncated return).
    steps = torch.arange(done.shape[0]).unsqueeze(1)
    last_end = torch.where(done, steps, -1).max(0).values  # (B,), -1: no whole day yet
    keep = (steps <= last_end).reshape(-1)

    def flat(chunks: list[torch.Tensor]) -> torch.Tensor:  # (T, B, ...) -> (kept, ...), time-major
        return torch.stack(chunks).reshape(-1, *chunks[0].shape[1:])[keep]

    started = (done.sum(0) + 1).tolist()  # whole days and the one cut off, per row
    return Demonstrations(
        observations={role: flat(obs[role]) for role in ROLES},
        masks={role: flat(masks[role]) for role in ROLES},
        actions={role: flat(actions[role]) for role in ROLES},
        state=flat(states),
        returns={role: returns[role].reshape(-1)[keep] for role in ROLES},
        day_seeds=training_day_seeds(args.seed, started),
        days=int(done.sum()),
    )


Student = Callable[[str, np.ndarray, np.ndarray], int]
"""A learner playing a role: (role, encoded observation, mask) -> its action (a DAgger round's driver)."""


def collect_planner_demonstrations(
    args: Args,
    days: int,
    planner: Any = None,
    student: Student | None = None,
    beta: float = 1.0,
    skip: list[int] | None = None,
    mix_seed: int = 0,
) -> Demonstrations:
    """Play ``planner`` (default :class:`policies.planner.TeamPlannerPolicy`) on ``days`` training days.

    The planner imagines futures from the episode's own simulator, so each day is played as the
    grader plays it (:func:`grading.grader.run_team_episode`): the scalar AEC env reset with the
    day's seed, the policy reset with ``policy_seed(day_seed)`` and that env's hospital, one
    ``act_role`` per role turn. The days are the training envs' (:func:`training_day_seeds`):
    ``days`` spread over the ``args.n_envs`` rows in turn (row ``r`` plays its scenario, as in
    :class:`~training.benchmarl.env.HospitalTorchEnv`; a multiple of ``n_envs`` gives every row,
    so every scenario, the same number of days), after the first ``skip[r]`` days of each row. Each
    role's observation and mask are the ones at its own turn (what the planner saw), the critic's
    state the one at the tick's start (the triage's turn, where :class:`HospitalTorchEnv` reads it),
    both encoded by :func:`training.benchmarl.env.encode_state`; rewards are the AEC env's
    (``--reward-mode``, ``--reward-overrides``) times ``--reward-scale``. ``--reward score`` is
    refused by :class:`Args`.

    DAgger (``student`` given): at every role turn the planner *labels* the state (the recorded
    action is its choice) and the student plays it, except with probability ``beta`` (per turn,
    drawn from ``mix_seed``) where the planner's own choice is played. A label is a pure function
    of the state and the day: the planner's generator is reseeded at each turn from
    ``(policy_seed(day), tick, role)``, and the planner only reads the episode's hospital through
    imagined copies, so labelling never changes the episode. ``student_actions`` records what the
    student would have played at every turn.
    """
    import torch

    from training.benchmarl.env import split_rows

    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be a probability, got {beta!r}")
    planner = TeamPlannerPolicy() if planner is None else planner
    per_row = days_per_row(days, args.n_envs)
    row_scenarios = [
        s for s, n in zip(args.scenarios, split_rows(args.n_envs, args.scenarios)) for _ in range(n)
    ]
    seeds = iter(training_day_seeds(args.seed, per_row, skip))
    mixer = np.random.default_rng(mix_seed)
    keys = ("obs", "mask", "action", "student", "state", "reward", "done")
    rows: dict[str, list[Any]] = {k: [] for k in keys}
    played = []
    for scenario, n in zip(row_scenarios, per_row):
        env = HospitalAECEnv(
            scenario=scenario, reward_mode=args.reward_mode, rewards=reward_table(args.reward_overrides)
        )
        for _ in range(n):
            day = next(seeds)
            played.append(day)
            env.reset(seed=day)
            planner.reset(seed=policy_seed(day), hospital=env.hospital)
            done, tick = False, 0
            while not done:
                obs, masks, actions, learner = {}, {}, {}, {}
                for role in ROLES:
                    if env.agent_selection != role:
                        raise RuntimeError(f"AEC turn order changed: {env.agent_selection} before {role}")
                    seen = env.observe(role)
                    encoded = encode_state(env.state())  # after the earlier roles' actions
                    if role == ROLES[0]:  # the critic's state: the tick's start, as HospitalTorchEnv reads it
                        rows["state"].append(encoded)
                    obs[role] = encoded[ROLE_INDEX[role]]
                    masks[role] = np.asarray(seen["action_mask"], bool)
                    if student is None:  # the planner plays, as the grader plays it
                        actions[role] = int(planner.act_role(role, seen["observation"], seen["action_mask"]))
                        env.step(actions[role])
                        continue
                    actions[role] = label(planner, env, role, day, tick)
                    learner[role] = int(student(role, obs[role], masks[role]))
                    env.step(actions[role] if beta > 0 and mixer.random() < beta else learner[role])
                rows["obs"].append(obs)
                rows["mask"].append(masks)
                rows["action"].append(actions)
                rows["student"].append(learner)
                rows["reward"].append([env.rewards[role] * args.reward_scale for role in ROLES])
                done = any(env.terminations.values()) or any(env.truncations.values())
                rows["done"].append(done)
                tick += 1
    reward = torch.tensor(rows["reward"], dtype=torch.float32)  # (N, roles): days one after another
    done_t = torch.tensor(rows["done"]).unsqueeze(1)
    returns = {
        role: _discounted(reward[:, k : k + 1], done_t, args.gamma).reshape(-1)
        for k, role in enumerate(ROLES)
    }

    def stack(key: str, role: str, dtype: Any) -> torch.Tensor:
        return torch.as_tensor(np.stack([row[role] for row in rows[key]]), dtype=dtype)

    def chosen(key: str) -> dict[str, torch.Tensor]:
        return {role: torch.tensor([row[role] for row in rows[key]], dtype=torch.int64) for role in ROLES}

    return Demonstrations(
        observations={role: stack("obs", role, torch.float32) for role in ROLES},
        masks={role: stack("mask", role, torch.bool) for role in ROLES},
        actions=chosen("action"),
        state=torch.as_tensor(np.stack(rows["state"])),
        returns=returns,
        day_seeds=played,
        days=len(played),
        student_actions=chosen("student") if student is not None else None,
    )


def label(planner: Any, env: Any, role: str, day: int, tick: int) -> int:
    """The planner's choice for ``role`` at its turn in ``env`` (an AEC env on training day ``day``,
    ``tick`` ticks in; the planner reset on that day's hospital): its generator reseeded from
    ``(policy_seed(day), tick, role)`` first, so the label depends on this state and the day only,
    not on how many draws the turns before took. The planner reads the episode's hospital only
    through imagined copies (``Hospital.imagine``): the episode is left as it was."""

    if env.agent_selection != role:
        raise ValueError(f"it is {env.agent_selection}'s turn, not {role}'s")
    planner.rng = np.random.default_rng([policy_seed(day), tick, ROLES.index(role)])
    seen = env.observe(role)
    return int(planner.act_role(role, seen["observation"], seen["action_mask"]))


def aggregate(parts: list[Demonstrations]) -> Demonstrations:
    """DAgger's data set: every round's states and labels, one after another (days kept whole)."""
    import torch

    def cat(get: Callable[[Demonstrations], torch.Tensor]) -> torch.Tensor:
        return torch.cat([get(part) for part in parts])

    return Demonstrations(
        observations={role: cat(lambda d, r=role: d.observations[r]) for role in ROLES},
        masks={role: cat(lambda d, r=role: d.masks[r]) for role in ROLES},
        actions={role: cat(lambda d, r=role: d.actions[r]) for role in ROLES},
        state=cat(lambda d: d.state),
        returns={role: cat(lambda d, r=role: d.returns[r]) for role in ROLES},
        day_seeds=[seed for part in parts for seed in part.day_seeds],
        days=sum(part.days for part in parts),
    )


def greedy_student(experiment: Any) -> Student:
    """BenchMARL's actors as they are graded: each role's most probable action its mask allows
    (copies of the actor MLPs, the modules :func:`training.benchmarl.train.export_actors` exports)."""
    import torch

    nets = actor_nets(experiment)

    def act(role: str, features: np.ndarray, mask: np.ndarray) -> int:
        with torch.no_grad():
            logits = nets[role](torch.from_numpy(np.asarray(features, np.float32)).unsqueeze(0))[0].numpy()
        return int(np.argmax(np.where(mask, logits, -np.inf)))

    return act


def _discounted(rewards: torch.Tensor, done: torch.Tensor, gamma: float) -> torch.Tensor:
    """Discounted return from each (tick, env) to the end of its day ((T, B) in, (T, B) out)."""
    import torch

    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = rewards[t] + gamma * running * (~done[t]).float()
        out[t] = running
    return out


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Forbidden actions at -inf: the categorical distribution the masked actor samples from."""
    return logits.masked_fill(~mask, float("-inf"))


def critic_values(
    experiment: Any, role: str, observations: torch.Tensor, state: torch.Tensor
) -> torch.Tensor:
    """``role``'s critic in BenchMARL's PPO loss (with the parameters that loss optimises): (N,)."""
    loss = experiment.losses[role]
    td = actor_td(role, observations)
    td.set("state", state)
    with loss.critic_network_params.to_module(loss.critic_network):
        out = loss.critic_network(td)
    return out.get((role, "state_value")).reshape(-1)


@dataclass
class CloneReport:
    """What cloning reached, per role: action agreement with the rules and the critic's fit."""

    agreement: dict[str, float]
    """Share of the demonstration states where the cloned actor's most likely allowed action is the rules'."""
    critic_rmse: dict[str, float]
    """Root-mean-square error of the fitted critic against the discounted returns (training scale)."""
    return_std: dict[str, float]
    """Standard deviation of those returns (what a constant critic's error would be)."""
    states: int
    days: int
    rounds: list[dict[str, Any]] = field(default_factory=list)
    """DAgger: one entry per round (its days, beta, the student's agreement with the planner's labels
    on the states it visited, the fit's agreement on the aggregated data); empty without DAgger."""

    def as_json(self) -> dict[str, Any]:
        out = {
            "agreement": {k: round(v, 4) for k, v in self.agreement.items()},
            "critic_rmse": {k: round(v, 4) for k, v in self.critic_rmse.items()},
            "return_std": {k: round(v, 4) for k, v in self.return_std.items()},
            "states": self.states,
            "days": self.days,
        }
        return {**out, "dagger": self.rounds} if self.rounds else out


def clone_into(
    experiment: Any,
    demos: Demonstrations,
    epochs: int,
    lr: float = 1e-3,
    minibatch: int = CLONE_MINIBATCH,
    seed: int = 0,
) -> CloneReport:
    """Fit every role's actor (masked cross-entropy) and critic (squared error to the returns) of
    ``experiment`` to ``demos``, in place: PPO then starts from these parameters."""
    import torch
    from torch.nn.functional import cross_entropy, mse_loss

    gen = torch.Generator().manual_seed(seed)
    n = len(demos)
    agreement, rmse, spread = {}, {}, {}
    for role in ROLES:
        obs, mask, action = demos.observations[role], demos.masks[role], demos.actions[role]
        target = demos.returns[role]
        loss = experiment.losses[role]
        actor = experiment.group_policies[role].module[0]
        critic_params = list(loss.critic_network_params.flatten_keys().values())
        actor_opt = torch.optim.Adam(actor.parameters(), lr=lr)
        critic_opt = torch.optim.Adam(critic_params, lr=lr)
        for _ in range(epochs):
            for idx in torch.randperm(n, generator=gen).split(minibatch):
                logits = masked_logits(actor_logits(experiment, role, obs[idx]), mask[idx])
                actor_opt.zero_grad()
                cross_entropy(logits, action[idx]).backward()
                actor_opt.step()
                values = critic_values(experiment, role, obs[idx], demos.state[idx])
                critic_opt.zero_grad()
                mse_loss(values, target[idx]).backward()
                critic_opt.step()
        with torch.no_grad():
            greedy = masked_logits(actor_logits(experiment, role, obs), mask).argmax(-1)
            agreement[role] = float((greedy == action).float().mean())
            values = critic_values(experiment, role, obs, demos.state)
            rmse[role] = float((values - target).pow(2).mean().sqrt())
            spread[role] = float(target.std())
    return CloneReport(agreement, rmse, spread, states=n, days=demos.days)


def dagger(experiment: Any, args: Args, planner: Any = None) -> CloneReport:
    """DAgger (Ross, Gordon & Bagnell 2011) with ``team_planner`` as the expert, into ``experiment``.

    Round 0 is :func:`collect_planner_demonstrations` (the planner plays ``--warm-start-days``
    training days) and :func:`clone_into`. Each of the ``--dagger-rounds`` later rounds ``i``: the
    current actors (:func:`greedy_student`, as graded) play ``--dagger-days`` fresh training days
    (each row's next days in its seed stream), the planner's own choice played instead with
    probability ``beta_i = --dagger-beta ** i`` per turn; the planner labels every role turn; the
    labelled states join the data set and the actors and critics are re-fitted on all of it
    (``--warm-start-epochs``, continuing from the current parameters). The fitted critics thus
    end on returns of the last students' play as well as the planner's."""

    planner = TeamPlannerPolicy() if planner is None else planner
    sizes = [args.warm_start_days] + [args.dagger_days] * args.dagger_rounds
    seen = [0] * args.n_envs  # days each training row has played so far
    parts: list[Demonstrations] = []
    rounds = []
    report = None
    for i, days in enumerate(sizes):
        beta = args.dagger_beta**i  # 1 in round 0: the planner plays
        student = greedy_student(experiment) if i else None
        part = collect_planner_demonstrations(
            args, days, planner, student=student, beta=beta, skip=seen, mix_seed=args.seed * 1000 + i
        )
        seen = [a + b for a, b in zip(seen, days_per_row(days, args.n_envs))]
        parts.append(part)
        data = aggregate(parts)
        epochs, lr = args.warm_start_epochs, args.warm_start_lr
        report = clone_into(experiment, data, epochs, lr=lr, seed=args.seed + i)
        row: dict[str, Any] = {"round": i, "beta": beta, "days": part.days, "states": len(part)}
        if part.student_actions is not None:
            row["student_agreement"] = {
                role: round(float((part.student_actions[role] == part.actions[role]).float().mean()), 4)
                for role in ROLES
            }
        row["fit_agreement"] = {k: round(v, 4) for k, v in report.agreement.items()}
        rounds.append(row)
    assert report is not None
    if args.dagger_rounds:
        report.rounds = rounds
    return report


def warm_start(experiment: Any, args: Args) -> CloneReport:
    """Collect ``args.warm_start_days`` days of ``args.warm_start``'s play; clone it into ``experiment``
    (``team_planner``: then ``args.dagger_rounds`` DAgger rounds, :func:`dagger`)."""
    if args.warm_start == "team_heuristic":
        demos = collect_demonstrations(args, args.warm_start_days)
        return clone_into(
            experiment, demos, epochs=args.warm_start_epochs, lr=args.warm_start_lr, seed=args.seed
        )
    if args.warm_start == "team_planner":
        return dagger(experiment, args)
    raise ValueError(f"unknown warm start {args.warm_start!r}; choose from {WARM_STARTS}")


__all__ = [
    "WARM_STARTS",
    "CloneReport",
    "Demonstrations",
    "aggregate",
    "clone_into",
    "collect_demonstrations",
    "collect_planner_demonstrations",
    "dagger",
    "days_per_row",
    "greedy_student",
    "label",
    "training_day_seeds",
    "warm_start",
]
