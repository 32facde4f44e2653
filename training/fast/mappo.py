"""MAPPO and IPPO on the natively batched multi-agent env, in one file: ``hospital-marl train fast-mappo``.

CleanRL-style: the arguments (a dataclass, each field's docstring is its ``--help``), then the loop.
B departments step together (:class:`~hospital_marl.envs.vector.HospitalMARLVectorEnv`, one vector
per scenario with ``--all-scenarios``); each tick the three roles act from their own observations
(the same fixed-scale encoding as every learned team policy: :func:`policies.marl.encode_role`, here
read off :func:`policies.marl.encode_state` of the global state), their masked categorical actions
are sampled, and every ``num_envs x steps`` frames PPO updates actors and critics.

- ``mappo``: one centralised critic on the encoded global state (106 numbers), one value per tick
  for the team reward; every role's ratio is clipped against that shared advantage.
- ``ippo``: one critic per role on that role's observation; each role's own advantage.
- ``--shared-actor``: one actor network for the three roles (the role's observation zero-padded to
  the largest, plus a role one-hot; actions padded to 21, padded ones always masked), otherwise one
  actor per role.
- ``--actor entity``: each role's actor is :class:`training.fast.entity.EntityActor` (a shared
  network per entity block, pooled context, one logit per action type per targeted entity), not an
  MLP over the whole observation; exported the same way (one ONNX per role).
- ``--obs-norm``: every network reads the encoded state normalised by its running mean / variance
  (updated from each tick's batch before it is read); the statistics are frozen into the ONNX actors.
- ``--norm-reward``: rewards divided by the running std of the discounted return (SB3 VecNormalize).
- ``--recurrent``: a GRU core in every actor and critic (CleanRL ``ppo_atari_lstm.py``): hidden
  states carried across rollouts, zeroed at a day's start, the update's minibatches whole department
  sequences from the rollout's stored initial states. Exported as ONNX actors of one decision, the
  hidden state in and out (:class:`policies.fast.RecurrentTeamPolicy` carries it); ``best.pt`` /
  ``final.pt`` keep the torch actors too.

A *frame* is one tick of one department: three role decisions. Checkpoint choice grades the actors
on validation days (``--eval-seed``, default 1000: not the held-out days of the tables) every
``--eval-interval`` frames with the evaluation function :func:`train` is given (the CLI gives
:func:`grading.grade`, team track). A run directory gets ``fast.json`` (``format:
hospital_marl.fast/1``), the best and the final actors as ONNX (``best/<role>.onnx``,
``final/<role>.onnx``: encoded role observation -> logits, what :mod:`policies.fast` plays without
torch), ``final.pt`` (torch state to inspect or continue from) and ``curve.json`` / ``curve.csv``.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from hospital_marl.envs.observations import BLOCK_OFFSETS, ROLE_INDEX, STATE_SIZE
from hospital_marl.envs.protocol import AEC
from hospital_marl.envs.vector import HospitalMARLVectorEnv
from hospital_marl.envs.wrappers import VectorScoreReward
from policies.fast import FORMAT, METADATA_FILE, RecurrentStep, RecurrentTeamPolicy
from policies.marl import MAX_ACTIONS, MAX_OBS, MarlTeamPolicy, encode_state, logits_role
from policies.protocol import as_trained
from training.common import Clock, Evaluate, eval_row, require_evaluate, reward_table, write_curve, write_json
from training.fast.args import MASK_COLUMNS, ROLE_DIMS, SEED_BASE
from training.fast.args import MappoArgs as Args
from training.fast.common import (
    OneStep,
    RecurrentNet,
    ReturnNormaliser,
    RunningMeanStd,
    clipped_surrogate,
    export_onnx,
    export_recurrent_onnx,
    gae,
    logp_entropy,
    masked,
    mlp,
    pick_device,
    sample,
)
from training.fast.diagnostics import DIAGNOSTIC_FILE, behaviour, critical_counts, type_entropy
from training.fast.entity import EntityActor

_QUEUE = BLOCK_OFFSETS["waiting_queue"]
QUEUE_SLOTS = _QUEUE[2][0]
QUEUE_SEVERITY = np.arange(_QUEUE[0], _QUEUE[1], _QUEUE[2][1])
"""The global state's columns of each waiting-queue slot's severity (its first field)."""


# ------------------------------------------------------------------ networks
class SharedRoleActor(nn.Module):
    """One role's view of the shared actor: pads the role's encoded observation to MAX_OBS, appends
    the role one-hot, keeps the role's own logits. What is exported per role, so a shared-actor run
    loads like any other (one ONNX per role, encoded role observation -> logits)."""

    def __init__(self, net: nn.Module, role: str) -> None:
        super().__init__()
        self.net, self.dim, self.n = net, ROLE_DIMS[role], ROLE_ACTION_COUNTS[role]
        one_hot = torch.zeros(MAX_OBS - self.dim + len(ROLES))
        one_hot[MAX_OBS - self.dim + ROLES.index(role)] = 1.0
        self.register_buffer("tail", one_hot)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        tail = self.tail.expand(obs.shape[0], -1)
        return self.net(torch.cat([obs, tail], dim=1))[:, : self.n]


class Agents(nn.Module):
    """The three actors (per role or one shared) and the critic(s); with ``--obs-norm`` the running
    statistics of the encoded state every network reads, with ``--recurrent`` a GRU in each."""

    def __init__(self, args: Args) -> None:
        super().__init__()
        hidden = list(args.hidden)
        self.recurrent = args.recurrent

        def net(n_in: int, n_out: int, gain: float) -> nn.Module:
            sizes = [n_in, *hidden, n_out]
            return RecurrentNet(sizes, gain) if args.recurrent else mlp(sizes, gain)

        if args.actor == "entity":
            self.actors = nn.ModuleDict({role: EntityActor(role, args.entity_width) for role in ROLES})
        elif args.shared_actor:
            self.shared = mlp([MAX_OBS + len(ROLES), *hidden, MAX_ACTIONS], 0.01)
            self.actors = nn.ModuleDict({role: SharedRoleActor(self.shared, role) for role in ROLES})
        else:
            self.actors = nn.ModuleDict(
                {role: net(ROLE_DIMS[role], ROLE_ACTION_COUNTS[role], 0.01) for role in ROLES}
            )
        self.centralised = args.algorithm == "mappo"
        if self.centralised:
            self.critic = net(STATE_SIZE, 1, 1.0)
        else:
            self.critics = nn.ModuleDict({role: net(ROLE_DIMS[role], 1, 1.0) for role in ROLES})
        self.index = {role: torch.as_tensor(np.arange(STATE_SIZE)[ROLE_INDEX[role]]) for role in ROLES}
        self.obs_rms = RunningMeanStd((STATE_SIZE,)) if args.obs_norm else None
        self.width = hidden[-1] if hidden else 0
        self.cores = [*ROLES, *(["critic"] if self.centralised else [f"critic_{r}" for r in ROLES])]
        """The recurrent cores, by name: one hidden state each."""

    def to(self, *args: Any, **kwargs: Any) -> Agents:
        out = super().to(*args, **kwargs)
        self.index = {role: idx.to(*args, **kwargs) for role, idx in self.index.items()}
        return out

    def normalise(self, state: torch.Tensor) -> torch.Tensor:
        """The encoded state as the networks read it (itself without ``--obs-norm``)."""
        return state if self.obs_rms is None else self.obs_rms(state)

    def views(self, state: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each role's encoded observation, read off the encoded state ``(..., 106)``."""
        return {role: state.index_select(-1, self.index[role]) for role in ROLES}

    def turn_views(self, states: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each role's encoded observation, read off the state it acted on: ``states`` is
        ``(..., 3, 106)``, one state per role in turn order (the same three on the simultaneous
        protocol; on the AEC one each role's is the state the earlier roles left)."""
        return {role: states[..., r, :].index_select(-1, self.index[role]) for r, role in enumerate(ROLES)}

    def logits(self, views: dict[str, torch.Tensor], mask: torch.Tensor) -> dict[str, torch.Tensor]:
        return {role: masked(self.actors[role](views[role]), mask[:, MASK_COLUMNS[role]]) for role in ROLES}

    def value(self, state: torch.Tensor, views: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(N,)`` for MAPPO (one team value), ``(N, 3)`` for IPPO (one per role)."""
        if self.centralised:
            return self.critic(state).squeeze(-1)
        return torch.cat([self.critics[role](views[role]) for role in ROLES], dim=1)

    def initial_hidden(self, n: int, device: torch.device) -> dict[str, torch.Tensor]:
        """Zero hidden states for ``n`` departments (none for the feed-forward networks)."""
        return (
            {core: torch.zeros((n, self.width), device=device) for core in self.cores}
            if self.recurrent
            else {}
        )

    def sequence(
        self,
        state: torch.Tensor,
        mask: torch.Tensor,
        hidden: dict[str, torch.Tensor],
        starts: torch.Tensor,
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, dict[str, torch.Tensor]]:
        """Recurrent networks over ``(T, N, 3, 106)`` normalised states (each role's, as
        :meth:`turn_views`; the critic reads the start-of-tick one, the first) from the hidden states
        before step 0 (zeroed where ``starts``): masked logits ``(T, N, n)``, values ``(T, N[, 3])``
        and the hidden states after step T-1. The update calls it with T = steps."""
        views, after, logits = self.turn_views(state), {}, {}
        state = state[..., 0, :]
        for role in ROLES:
            out, after[role] = self.actors[role](views[role], hidden[role], starts)
            logits[role] = masked(out, mask[..., MASK_COLUMNS[role]])
        if self.centralised:
            value, after["critic"] = self.critic(state, hidden["critic"], starts)
            return logits, value.squeeze(-1), after
        values = []
        for role in ROLES:
            value, after[f"critic_{role}"] = self.critics[role](views[role], hidden[f"critic_{role}"], starts)
            values.append(value)
        return logits, torch.cat(values, dim=-1), after

    def played_actors(self) -> dict[str, nn.Module]:
        """CPU copies of the actors as they are played and exported: raw encoded role observation
        (and, recurrent, hidden state and starts) -> logits, the observation statistics frozen in."""
        actors = copy.deepcopy(self.actors).to("cpu").eval()
        if self.obs_rms is None:
            return dict(actors)
        return {role: Normalised(self.obs_rms.frozen(self.index[role]).cpu(), actors[role]) for role in ROLES}


class Normalised(nn.Module):
    """An actor behind its frozen input normalisation (what ``--obs-norm`` exports)."""

    def __init__(self, norm: nn.Module, actor: nn.Module) -> None:
        super().__init__()
        self.norm, self.actor = norm, actor

    def forward(self, x: torch.Tensor, *state: torch.Tensor) -> Any:
        return self.actor(self.norm(x), *state)


class _TorchActor:
    """An actor as :class:`policies.learned.Logits` (one encoded observation -> logits) for grading."""

    def __init__(self, actor: nn.Module) -> None:
        self.actor = actor

    def __call__(self, features: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            x = torch.as_tensor(np.asarray(features, np.float32)).reshape(1, -1)
            return self.actor(x)[0].numpy()


def torch_step(actor: nn.Module) -> RecurrentStep:
    """A recurrent torch actor as :class:`~policies.fast.RecurrentTeamPolicy` plays it: one decision,
    the hidden state in and out as float32 arrays (what the exported actor takes and returns)."""

    one = OneStep(actor)  # the decision the exported actor is

    def step(features: np.ndarray, hidden: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = torch.as_tensor(np.asarray(features, np.float32)).reshape(1, -1)
        with torch.no_grad():
            out, after = one(x, torch.as_tensor(hidden).reshape(1, -1))
        return out[0].numpy(), after[0].numpy()

    return step


def team_policy(agents: Agents, name: str, protocol: str = AEC) -> Any:
    """The actors as a team-track policy (CPU copies: grading must not disturb training), played on
    the protocol they are trained on (:func:`policies.protocol.as_trained`)."""
    actors = agents.played_actors()
    policy: MarlTeamPolicy | RecurrentTeamPolicy
    if agents.recurrent:
        policy = RecurrentTeamPolicy({role: torch_step(actors[role]) for role in ROLES}, agents.width, name)
    else:
        policy = MarlTeamPolicy(
            {role: logits_role(role, _TorchActor(actors[role])) for role in ROLES}, name=name
        )
    return as_trained(policy, protocol)


# ------------------------------------------------------------------ envs
class Departments:
    """``num_envs`` departments as one batch: a vector env per scenario, rows concatenated."""

    def __init__(self, args: Args) -> None:
        names = args.scenarios
        base, extra = divmod(args.num_envs, len(names))
        self.rows = [base + (k < extra) for k in range(len(names))]
        rewards = reward_table(args.reward_overrides)
        self.vecs = [HospitalMARLVectorEnv(n, scenario=s, rewards=rewards) for n, s in zip(self.rows, names)]
        self.steppers: list[Any] = [VectorScoreReward(v) if args.reward == "score" else v for v in self.vecs]
        """What ``reset``/``step`` call: the vector envs, or their score-reward wrappers."""
        self.scores: list[float] = []
        self.finished: list[dict[str, float]] = []
        """The critical counters of the days ended since the last diagnostic read them."""
        self._observe(
            [
                env.reset(seed=SEED_BASE + args.seed * 100_000 + k * 10_000)[0]
                for k, env in enumerate(self.steppers)
            ]
        )

    def _observe(self, observations: list[dict[str, dict[str, np.ndarray]]]) -> None:
        """The batch's raw global state ``(B, 106)`` and concatenated role masks ``(B, 41)``."""
        self.state = np.concatenate([vec.state_vectors for vec in self.vecs])
        self.masks = np.concatenate(
            [np.concatenate([obs[role]["action_mask"] for role in ROLES], axis=1) for obs in observations]
        ).astype(bool)

    def turn(self, r: int, actions: np.ndarray) -> None:
        """Role ``r``'s AEC turn in every department (actions ``(B,)``): carried out at once, then
        :attr:`state` / :attr:`masks` are the mid-tick state the next role reads."""
        start = 0
        for env, n in zip(self.steppers, self.rows):
            env.turn(ROLES[r], actions[start : start + n])
            start += n
        self._observe([vec.observations() for vec in self.vecs])

    def end_tick(self) -> tuple[np.ndarray, np.ndarray]:
        """The tick after the three turns: as :meth:`step`."""
        return self._ticked([env.end_tick() for env in self.steppers])

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint actions ``(B, 3)`` on the simultaneous protocol -> team rewards ``(B,)`` and episode
        ends ``(B,)``; finished days restart at once (their scores are appended to :attr:`scores`)."""
        results, start = [], 0
        for env, n in zip(self.steppers, self.rows):
            part = actions[start : start + n]
            start += n
            results.append(env.step({role: part[:, r] for r, role in enumerate(ROLES)}))
        return self._ticked(results)

    def _ticked(self, results: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
        observations, rewards, dones = [], [], []
        for obs, rew, term, trunc, info in results:
            observations.append(obs)
            rewards.append(rew[ROLES[0]])
            dones.append(term[ROLES[0]] | trunc[ROLES[0]])
            if "final_info" in info:
                final = info["final_info"]
                self.scores.extend(final["score"][final["_score"]].tolist())
                self.finished.extend(critical_counts(final))
        self._observe(observations)
        return np.concatenate(rewards), np.concatenate(dones)


# ------------------------------------------------------------------ training
class Rollout:
    """One rollout's buffers (``steps`` ticks x ``num_envs`` departments) and what carries over from
    one rollout to the next: the GRU hidden states, which departments start a day at the next tick,
    the return normaliser. ``states`` holds what the networks read (normalised with ``--obs-norm``,
    with the statistics of the tick it was read at), so the update recomputes the rollout's logits."""

    def __init__(self, args: Args, agents: Agents, device: torch.device) -> None:
        T, B = args.steps, args.num_envs
        value_shape = (T, B) if agents.centralised else (T, B, len(ROLES))
        self.states = torch.zeros((T, B, len(ROLES), STATE_SIZE), device=device)
        """Each role's state as it acted on it (turn order; simultaneous: the same three)."""
        self.masks = torch.zeros((T, B, sum(ROLE_ACTION_COUNTS.values())), dtype=torch.bool, device=device)
        self.actions = torch.zeros((T, B, len(ROLES)), dtype=torch.long, device=device)
        self.logps = torch.zeros((T, B, len(ROLES)), device=device)
        self.values = torch.zeros(value_shape, device=device)
        self.rewards = torch.zeros((T, B), device=device)
        self.dones = torch.zeros((T, B), device=device)
        self.queue_severity = torch.zeros((T, B, QUEUE_SLOTS), device=device)
        """The raw severity of each waiting-queue slot triage acted on (the diagnostic's split)."""
        self.starts = torch.zeros((T, B), device=device)
        """1 where that tick's observation opens a day (the GRU state is zeroed before it)."""
        self.next_start = torch.ones(B, device=device)
        self.hidden = agents.initial_hidden(B, device)
        self.hidden0 = dict(self.hidden)
        """The hidden states before this rollout's first tick: where the update's sequences start."""
        self.returns = ReturnNormaliser(B, args.gamma) if args.norm_reward else None
        self.aec = args.protocol == AEC
        self.masked_taken = 0
        self.args, self.device = args, device

    def read(
        self, agents: Agents, envs: Departments, update_stats: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's state as the networks read it and its masks; a state read to act on also
        updates the observation statistics first (as Gymnasium's NormalizeObservation does)."""
        state = torch.from_numpy(encode_state(envs.state)).to(self.device)
        if update_stats and agents.obs_rms is not None:
            agents.obs_rms.update(state)
        return agents.normalise(state), torch.from_numpy(envs.masks).to(self.device)

    def collect(self, agents: Agents, envs: Departments, gen: torch.Generator) -> None:
        """Step the departments ``steps`` ticks with the current actors, filling the buffers: on
        the AEC protocol each role acts in turn on the state the earlier ones left, on the
        simultaneous one all three on the start-of-tick state."""
        self.hidden0 = dict(self.hidden)
        for t in range(self.args.steps):
            self.starts[t] = self.next_start
            for r, role in enumerate(ROLES):
                if r == 0 or self.aec:
                    state, mask = self.read(agents, envs, update_stats=True)
                if r == 0:
                    self.queue_severity[t] = torch.from_numpy(envs.state[:, QUEUE_SEVERITY]).to(self.device)
                cols = MASK_COLUMNS[role]
                with torch.no_grad():
                    view = state.index_select(-1, agents.index[role])
                    if agents.recurrent:
                        out, self.hidden[role] = agents.actors[role](
                            view[None], self.hidden[role], self.next_start[None]
                        )
                        out = out[0]
                    else:
                        out = agents.actors[role](view)
                    action, logp = sample(masked(out, mask[:, cols]), gen)
                self.states[t, :, r], self.masks[t, :, cols] = state, mask[:, cols]
                self.actions[t, :, r], self.logps[t, :, r] = action, logp
                self.masked_taken += int((~mask[:, cols].gather(1, action[:, None])).sum())
                if self.aec:
                    envs.turn(r, action.cpu().numpy())
            with torch.no_grad():
                self.values[t] = self._value(agents, self.states[t])
            if self.aec:
                reward, done = envs.end_tick()
            else:
                reward, done = envs.step(self.actions[t].cpu().numpy())
            reward = reward * self.args.reward_scale
            if self.returns is not None:
                reward = self.returns(reward, done)
            self.rewards[t] = torch.from_numpy(reward).to(self.device)
            self.dones[t] = torch.from_numpy(done.astype(np.float32)).to(self.device)
            self.next_start = self.dones[t].clone()

    def _value(self, agents: Agents, states: torch.Tensor) -> torch.Tensor:
        """The critic(s) on a tick's per-role states ``(B, 3, 106)``: MAPPO's on the start-of-tick
        state, IPPO's on each role's own view; recurrent: the critic's GRU advanced one tick."""
        if not agents.recurrent:
            return agents.value(states[:, 0], agents.turn_views(states))
        start = self.next_start[None]
        if agents.centralised:
            value, self.hidden["critic"] = agents.critic(states[None, :, 0], self.hidden["critic"], start)
            return value[0].squeeze(-1)
        views, values = agents.turn_views(states), []
        for role in ROLES:
            core = f"critic_{role}"
            value, self.hidden[core] = agents.critics[role](views[role][None], self.hidden[core], start)
            values.append(value[0])
        return torch.cat(values, dim=-1)

    def advantages(self, agents: Agents, envs: Departments) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE advantages and returns, bootstrapped from the state after the last tick (read without
        updating the statistics or advancing the GRU: the next rollout's first tick does both)."""
        args = self.args
        with torch.no_grad():
            state, mask = self.read(agents, envs, update_stats=False)
            if agents.recurrent:
                per_role = state.unsqueeze(1).expand(-1, len(ROLES), -1)
                next_value = agents.sequence(per_role[None], mask[None], self.hidden, self.next_start[None])[
                    1
                ][0]
            else:
                next_value = agents.value(state, agents.views(state))
            team = (
                self.rewards if agents.centralised else self.rewards.unsqueeze(-1).expand(-1, -1, len(ROLES))
            )
            ended = self.dones if agents.centralised else self.dones.unsqueeze(-1).expand(-1, -1, len(ROLES))
            advantages = gae(team, self.values, ended, next_value, args.gamma, args.gae_lambda)
        return advantages, advantages + self.values


@torch.no_grad()
def diagnose(
    agents: Agents, buf: Rollout, envs: Departments, advantages: torch.Tensor, returns: torch.Tensor
) -> dict[str, Any]:
    """The behaviour diagnostic (:mod:`training.fast.diagnostics`) of the rollout just collected,
    with the probabilities of the policy that collected it (recomputed before the update)."""
    T, B = buf.actions.shape[:2]
    n = T * B
    if agents.recurrent:
        logits, _, _ = agents.sequence(buf.states, buf.masks, buf.hidden0, buf.starts)
    else:
        views = agents.turn_views(buf.states.reshape(n, len(ROLES), -1))
        logits = agents.logits(views, buf.masks.reshape(n, -1))
    probs = {role: torch.softmax(lg.reshape(n, -1), dim=-1).cpu() for role, lg in logits.items()}
    flat_masks = buf.masks.reshape(n, -1).cpu()
    masks = {role: flat_masks[:, MASK_COLUMNS[role]] for role in ROLES}
    rest = advantages.shape[2:]
    finished, envs.finished = envs.finished, []
    return behaviour(
        probs,
        masks,
        buf.actions.reshape(n, len(ROLES)).cpu(),
        advantages.reshape(n, *rest).cpu(),
        buf.values.reshape(n, *rest).cpu(),
        returns.reshape(n, *rest).cpu(),
        finished,
        buf.queue_severity.reshape(n, -1).cpu(),
    )


def ppo_loss(
    agents: Agents,
    logits: dict[str, torch.Tensor],
    value: torch.Tensor,
    mb: dict[str, torch.Tensor],
    args: Args,
) -> torch.Tensor:
    """The clipped surrogate of every role, minus the entropy bonus, plus the value loss."""
    adv = mb["adv"]
    if args.norm_adv:
        adv = (adv - adv.mean(0)) / (adv.std(0) + 1e-8)
    policy_loss = entropy = types = torch.zeros((), device=value.device)
    for r, role in enumerate(ROLES):
        logp, ent = logp_entropy(logits[role], mb["action"][:, r])
        role_adv = adv if agents.centralised else adv[:, r]
        policy_loss = policy_loss + clipped_surrogate(logp, mb["logp"][:, r], role_adv, args.clip)
        entropy = entropy + ent.mean()
        if args.type_entropy:
            types = types + type_entropy(logits[role], role).mean()
    value_loss = 0.5 * ((value - mb["ret"]) ** 2).mean()
    return policy_loss - args.entropy * entropy - args.type_entropy * types + args.value_loss * value_loss


def update(
    agents: Agents,
    optimizer: torch.optim.Optimizer,
    buf: Rollout,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    args: Args,
    gen: torch.Generator,
) -> None:
    """PPO's update on one rollout: ``args.epochs`` passes of shuffled minibatches (recurrent: of
    whole department sequences, whose hidden states recompute exactly from the stored first ones)."""
    T, B = buf.actions.shape[:2]
    device = advantages.device

    def step(loss: torch.Tensor) -> None:
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(agents.parameters(), args.max_grad_norm)
        optimizer.step()

    if agents.recurrent:
        per_mb = max(1, args.minibatch // T)
        for _ in range(args.epochs):
            order = torch.randperm(B, generator=gen, device=device)
            for lo in range(0, B, per_mb):
                idx = order[lo : lo + per_mb]
                hidden0 = {core: h[idx] for core, h in buf.hidden0.items()}
                logits, value, _ = agents.sequence(
                    buf.states[:, idx], buf.masks[:, idx], hidden0, buf.starts[:, idx]
                )
                m = T * len(idx)
                mb = {
                    "action": buf.actions[:, idx].reshape(m, len(ROLES)),
                    "logp": buf.logps[:, idx].reshape(m, len(ROLES)),
                    "adv": advantages[:, idx].reshape(m, *advantages.shape[2:]),
                    "ret": returns[:, idx].reshape(m, *returns.shape[2:]),
                }
                flat_logits = {role: lg.reshape(m, -1) for role, lg in logits.items()}
                step(ppo_loss(agents, flat_logits, value.reshape(m, *value.shape[2:]), mb, args))
        return
    n = T * B
    flat = {
        "state": buf.states.reshape(n, len(ROLES), STATE_SIZE),
        "mask": buf.masks.reshape(n, -1),
        "action": buf.actions.reshape(n, len(ROLES)),
        "logp": buf.logps.reshape(n, len(ROLES)),
        "adv": advantages.reshape(n, *advantages.shape[2:]),
        "ret": returns.reshape(n, *returns.shape[2:]),
    }
    for _ in range(args.epochs):
        order = torch.randperm(n, generator=gen, device=device)
        for lo in range(0, n, args.minibatch):
            mb = {k: v[order[lo : lo + args.minibatch]] for k, v in flat.items()}
            views = agents.turn_views(mb["state"])
            logits = agents.logits(views, mb["mask"])
            step(ppo_loss(agents, logits, agents.value(mb["state"][:, 0], views), mb, args))


class RunWriter:
    """What a run directory gets (:data:`METADATA_FILE`, the ONNX actors, the torch checkpoints),
    kept out of the training loop: the loop hands it the agents and the figures to record."""

    def __init__(self, args: Args, name: str) -> None:
        self.args, self.name, self.run_dir = args, name, args.run_dir
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.actors: dict[str, dict[str, str]] = {}
        self.checkpoints: dict[str, str] = {}
        (self.run_dir / DIAGNOSTIC_FILE).write_text("")

    def diagnostic(self, row: dict[str, Any]) -> None:
        """Append one update's behaviour diagnostic to ``behaviour.jsonl``."""
        with (self.run_dir / DIAGNOSTIC_FILE).open("a") as log:
            log.write(json.dumps(row) + "\n")

    def export_actors(self, agents: Agents, which: str) -> None:
        """One ONNX per role under ``which/``: raw encoded role observation (recurrent: and hidden
        state) -> logits (and the next hidden state)."""
        nets, files = agents.played_actors(), {}
        for role in ROLES:
            path = self.run_dir / which / f"{role}.onnx"
            if agents.recurrent:
                export_recurrent_onnx(nets[role], ROLE_DIMS[role], agents.width, path)
            else:
                export_onnx(nets[role], ROLE_DIMS[role], path)
            files[role] = path.relative_to(self.run_dir).as_posix()
        self.actors[which] = files

    def save_torch(self, agents: Agents, file: str) -> None:
        torch.save(
            {"agents": copy.deepcopy(agents).to("cpu").state_dict(), "args": self.args.as_json()},
            self.run_dir / file,
        )
        self.checkpoints[file.removesuffix(".pt")] = file

    def write(self, agents: Agents, complete: bool, figures: dict[str, Any]) -> None:
        """``fast.json``; written at every new best too, so a run stopped early still loads.
        ``figures``: best, final_eval, frames, the clock, the phases' seconds, the diagnostic, audit."""
        args, frames = self.args, figures["frames"]
        phases = {k: round(figures[k], 2) for k in ("collect_s", "update_s", "diagnose_s")}
        write_json(
            self.run_dir / METADATA_FILE,
            {
                "format": FORMAT,
                "name": self.name,
                "track": "team",
                "algorithm": args.algorithm,
                "protocol": args.protocol,
                "roles": list(ROLES),
                "complete": complete,
                "actors": self.actors,
                "export": "onnx"
                + (" (hidden state in and out: one decision per call)" if agents.recurrent else "")
                + (" (observation statistics frozen in front of each actor)" if args.obs_norm else ""),
                "recurrent": agents.recurrent,
                "hidden_size": agents.width if agents.recurrent else None,
                "checkpoints": self.checkpoints,
                "best": figures["best"],
                "final_eval": figures["final_eval"],
                "frames": frames,
                "role_decisions": frames * len(ROLES),
                "wall_time_s": figures["clock"].wall(),
                "cpu_time_s": figures["clock"].cpu(),
                **phases,
                "diagnostic": DIAGNOSTIC_FILE,
                "behaviour": figures["behaviour"],
                "frames_per_s": round(frames / max(figures["collect_s"] + figures["update_s"], 1e-9)),
                "audit": {
                    "masked_actions_taken": figures["masked_taken"],
                    "audited_actions": frames * len(ROLES),
                },
                "validation": {"seed": args.eval_seed, "episodes_per_scenario": args.eval_episodes},
                "args": args.as_json(),
                "command": args.command_line(),
            },
        )


def train(args: Args, evaluate: Evaluate) -> Path:
    """Train MAPPO / IPPO from scratch; grade on validation days; write the run directory."""
    require_evaluate(evaluate, "train(Args(...), grading.grade)")
    device = pick_device(args.device)
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    name = f"fast_{args.algorithm}"
    writer = RunWriter(args, name)

    envs = Departments(args)
    agents = Agents(args).to(device)
    optimizer = torch.optim.Adam(agents.parameters(), lr=args.learning_rate, eps=1e-5)
    per_update = args.num_envs * args.steps
    updates = -(-args.frames // per_update)
    buf = Rollout(args, agents, device)

    clock, rows, best = Clock(), [], None
    fig: dict[str, Any] = {"clock": clock, "frames": 0, "collect_s": 0.0, "update_s": 0.0, "diagnose_s": 0.0,
                           "behaviour": {}, "best": None, "final_eval": None, "masked_taken": 0}  # fmt: skip
    next_eval = args.eval_interval if args.eval_interval else args.frames
    for number in range(updates):
        if args.anneal_lr:
            spent = max(number / updates, clock.wall() / args.max_wall_s if args.max_wall_s else 0.0)
            optimizer.param_groups[0]["lr"] = args.learning_rate * max(1.0 - spent, 0.0)
        started = time.perf_counter()
        buf.collect(agents, envs, gen)
        fig["frames"] += per_update
        advantages, returns = buf.advantages(agents, envs)
        mid = time.perf_counter()
        fig["collect_s"] += mid - started
        fig["behaviour"] = {
            "update": number,
            "frames": fig["frames"],
            **diagnose(agents, buf, envs, advantages, returns),
        }
        writer.diagnostic(fig["behaviour"])
        fig["diagnose_s"] += time.perf_counter() - mid
        mid = time.perf_counter()
        update(agents, optimizer, buf, advantages, returns, args, gen)
        fig["update_s"] += time.perf_counter() - mid
        fig["masked_taken"] = buf.masked_taken

        out_of_time = bool(args.max_wall_s) and clock.wall() >= args.max_wall_s
        last = number == updates - 1 or out_of_time
        if fig["frames"] >= next_eval or last:
            next_eval += args.eval_interval or args.frames
            report = evaluate(
                team_policy(agents, name, args.protocol),
                episodes=args.eval_episodes,
                seed=args.eval_seed,
                scenarios=args.scenarios,
                track="team",
            )
            row = eval_row(report, fig["frames"], clock)
            row["role_decisions"] = fig["frames"] * len(ROLES)
            row["frames_per_s"] = round(fig["frames"] / max(fig["collect_s"] + fig["update_s"], 1e-9))
            row["train_score"] = round(float(np.mean(envs.scores)), 3) if envs.scores else None
            envs.scores.clear()
            rows.append(row)
            write_curve(rows, writer.run_dir)
            fig["final_eval"] = row
            if best is None or row["eval_score"] > best["eval_score"]:
                best = fig["best"] = row
                if agents.recurrent:
                    writer.save_torch(agents, "best.pt")
                writer.export_actors(agents, "best")
                writer.write(agents, False, fig)
            if args.progress:
                keys = ("timesteps", "eval_score", "frames_per_s", "train_score")
                print(json.dumps({k: row[k] for k in keys}), file=sys.stderr)
        if last:
            break

    writer.export_actors(agents, "final")
    writer.save_torch(agents, "final.pt")
    writer.write(agents, True, fig)
    return writer.run_dir


def summary(run_dir: Path) -> dict[str, Any]:
    """What ``hospital-marl train fast-mappo`` prints: the run's metadata less the per-role files."""
    meta = json.loads((Path(run_dir) / METADATA_FILE).read_text())
    keys = ("algorithm", "frames", "wall_time_s", "cpu_time_s", "frames_per_s", "audit", "best", "command")
    return {"run_dir": str(run_dir), **{k: meta[k] for k in keys}}
