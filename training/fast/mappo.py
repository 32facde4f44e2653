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
from hospital_marl.envs.observations import ROLE_INDEX, STATE_SIZE
from hospital_marl.envs.vector import HospitalMARLVectorEnv
from hospital_marl.envs.wrappers import VectorScoreReward
from policies.fast import FORMAT, METADATA_FILE
from policies.marl import MAX_ACTIONS, MAX_OBS, MarlTeamPolicy, encode_state, logits_role
from training.common import Clock, Evaluate, eval_row, require_evaluate, reward_table, write_curve, write_json
from training.fast.args import MASK_COLUMNS, ROLE_DIMS, SEED_BASE
from training.fast.args import MappoArgs as Args
from training.fast.common import (
    clipped_surrogate,
    export_onnx,
    gae,
    logp_entropy,
    masked,
    mlp,
    pick_device,
    sample,
)


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
    """The three actors (per role or one shared) and the critic(s)."""

    def __init__(self, args: Args) -> None:
        super().__init__()
        hidden = list(args.hidden)
        if args.shared_actor:
            self.shared = mlp([MAX_OBS + len(ROLES), *hidden, MAX_ACTIONS], 0.01)
            self.actors = nn.ModuleDict({role: SharedRoleActor(self.shared, role) for role in ROLES})
        else:
            self.actors = nn.ModuleDict(
                {role: mlp([ROLE_DIMS[role], *hidden, ROLE_ACTION_COUNTS[role]], 0.01) for role in ROLES}
            )
        self.centralised = args.algorithm == "mappo"
        if self.centralised:
            self.critic = mlp([STATE_SIZE, *hidden, 1], 1.0)
        else:
            self.critics = nn.ModuleDict({role: mlp([ROLE_DIMS[role], *hidden, 1], 1.0) for role in ROLES})
        self.index = {role: torch.as_tensor(np.arange(STATE_SIZE)[ROLE_INDEX[role]]) for role in ROLES}

    def to(self, *args: Any, **kwargs: Any) -> Agents:
        out = super().to(*args, **kwargs)
        self.index = {role: idx.to(*args, **kwargs) for role, idx in self.index.items()}
        return out

    def views(self, state: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each role's encoded observation, read off the encoded state ``(N, 106)``."""
        return {role: state.index_select(1, self.index[role]) for role in ROLES}

    def logits(self, views: dict[str, torch.Tensor], mask: torch.Tensor) -> dict[str, torch.Tensor]:
        return {role: masked(self.actors[role](views[role]), mask[:, MASK_COLUMNS[role]]) for role in ROLES}

    def value(self, state: torch.Tensor, views: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(N,)`` for MAPPO (one team value), ``(N, 3)`` for IPPO (one per role)."""
        if self.centralised:
            return self.critic(state).squeeze(-1)
        return torch.cat([self.critics[role](views[role]) for role in ROLES], dim=1)


class _TorchActor:
    """An actor as :class:`policies.learned.Logits` (one encoded observation -> logits) for grading."""

    def __init__(self, actor: nn.Module) -> None:
        self.actor = actor

    def __call__(self, features: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            x = torch.as_tensor(np.asarray(features, np.float32)).reshape(1, -1)
            return self.actor(x)[0].numpy()


def team_policy(agents: Agents, name: str) -> MarlTeamPolicy:
    """The actors as a team-track policy (CPU copies: grading must not disturb training)."""
    actors = copy.deepcopy(agents.actors).to("cpu").eval()
    return MarlTeamPolicy({role: logits_role(role, _TorchActor(actors[role])) for role in ROLES}, name=name)


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

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint actions ``(B, 3)`` -> team rewards ``(B,)`` and episode ends ``(B,)``; finished
        days restart at once (their scores are appended to :attr:`scores`)."""
        observations, rewards, dones, start = [], [], [], 0
        for env, n in zip(self.steppers, self.rows):
            part = actions[start : start + n]
            start += n
            obs, rew, term, trunc, info = env.step({role: part[:, r] for r, role in enumerate(ROLES)})
            observations.append(obs)
            rewards.append(rew[ROLES[0]])
            dones.append(term[ROLES[0]] | trunc[ROLES[0]])
            if "final_info" in info:
                final = info["final_info"]
                self.scores.extend(final["score"][final["_score"]].tolist())
        self._observe(observations)
        return np.concatenate(rewards), np.concatenate(dones)


# ------------------------------------------------------------------ training
def train(args: Args, evaluate: Evaluate) -> Path:
    """Train MAPPO / IPPO from scratch; grade on validation days; write the run directory."""
    require_evaluate(evaluate, "train(Args(...), grading.grade)")
    device = pick_device(args.device)
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    run_dir = args.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    name = f"fast_{args.algorithm}"

    envs = Departments(args)
    agents = Agents(args).to(device)
    optimizer = torch.optim.Adam(agents.parameters(), lr=args.learning_rate, eps=1e-5)
    B, T = args.num_envs, args.steps
    per_update = B * T
    updates = -(-args.frames // per_update)
    value_shape = (T, B) if agents.centralised else (T, B, len(ROLES))
    states = torch.zeros((T, B, STATE_SIZE), device=device)
    masks = torch.zeros((T, B, sum(ROLE_ACTION_COUNTS.values())), dtype=torch.bool, device=device)
    actions = torch.zeros((T, B, len(ROLES)), dtype=torch.long, device=device)
    logps = torch.zeros((T, B, len(ROLES)), device=device)
    values = torch.zeros(value_shape, device=device)
    rewards = torch.zeros((T, B), device=device)
    dones = torch.zeros((T, B), device=device)

    clock, frames, rows, best, masked_taken = Clock(), 0, [], None, 0
    actors: dict[str, dict[str, str]] = {}

    def export_actors(nets: nn.ModuleDict, out: Path) -> dict[str, str]:
        return {
            role: export_onnx(copy.deepcopy(nets[role]), ROLE_DIMS[role], out / f"{role}.onnx")
            .relative_to(run_dir)
            .as_posix()
            for role in ROLES
        }

    def write_run(complete: bool) -> None:
        """``fast.json``; written at every new best too, so a run stopped early still loads."""
        write_json(
            run_dir / METADATA_FILE,
            {
                "format": FORMAT,
                "name": name,
                "track": "team",
                "algorithm": args.algorithm,
                "roles": list(ROLES),
                "complete": complete,
                "actors": actors,
                "best": best[0] if best else None,
                "final_eval": rows[-1] if rows else None,
                "frames": frames,
                "role_decisions": frames * len(ROLES),
                "wall_time_s": clock.wall(),
                "cpu_time_s": clock.cpu(),
                "collect_s": round(collect_s, 2),
                "update_s": round(update_s, 2),
                "frames_per_s": round(frames / max(collect_s + update_s, 1e-9)),
                "audit": {"masked_actions_taken": masked_taken, "audited_actions": frames * len(ROLES)},
                "validation": {"seed": args.eval_seed, "episodes_per_scenario": args.eval_episodes},
                "args": args.as_json(),
                "command": args.command_line(),
            },
        )

    next_eval = args.eval_interval if args.eval_interval else args.frames
    collect_s = update_s = 0.0
    for update in range(updates):
        if args.anneal_lr:
            spent = max(update / updates, clock.wall() / args.max_wall_s if args.max_wall_s else 0.0)
            optimizer.param_groups[0]["lr"] = args.learning_rate * max(1.0 - spent, 0.0)
        started = time.perf_counter()
        for t in range(T):
            state = torch.from_numpy(encode_state(envs.state)).to(device)
            mask = torch.from_numpy(envs.masks).to(device)
            with torch.no_grad():
                views = agents.views(state)
                logits = agents.logits(views, mask)
                drawn = [sample(logits[role], gen) for role in ROLES]
                values[t] = agents.value(state, views)
            joint = torch.stack([a for a, _ in drawn], dim=1)
            states[t], masks[t], actions[t] = state, mask, joint
            logps[t] = torch.stack([lp for _, lp in drawn], dim=1)
            for r, role in enumerate(ROLES):
                masked_taken += int((~mask[:, MASK_COLUMNS[role]].gather(1, joint[:, r : r + 1])).sum())
            reward, done = envs.step(joint.cpu().numpy())
            rewards[t] = torch.from_numpy(reward * args.reward_scale).to(device)
            dones[t] = torch.from_numpy(done.astype(np.float32)).to(device)
        frames += per_update
        with torch.no_grad():
            state = torch.from_numpy(encode_state(envs.state)).to(device)
            next_value = agents.value(state, agents.views(state))
            team = rewards if agents.centralised else rewards.unsqueeze(-1).expand(-1, -1, len(ROLES))
            ended = dones if agents.centralised else dones.unsqueeze(-1).expand(-1, -1, len(ROLES))
            advantages = gae(team, values, ended, next_value, args.gamma, args.gae_lambda)
            returns = advantages + values
        mid = time.perf_counter()
        collect_s += mid - started

        n = T * B
        flat = {
            "state": states.reshape(n, STATE_SIZE),
            "mask": masks.reshape(n, -1),
            "action": actions.reshape(n, len(ROLES)),
            "logp": logps.reshape(n, len(ROLES)),
            "adv": advantages.reshape(n, *advantages.shape[2:]),
            "ret": returns.reshape(n, *returns.shape[2:]),
        }
        for _ in range(args.epochs):
            order = torch.randperm(n, generator=gen, device=device)
            for lo in range(0, n, args.minibatch):
                mb = {k: v[order[lo : lo + args.minibatch]] for k, v in flat.items()}
                views = agents.views(mb["state"])
                logits = agents.logits(views, mb["mask"])
                adv = mb["adv"]
                if args.norm_adv:
                    adv = (adv - adv.mean(0)) / (adv.std(0) + 1e-8)
                policy_loss = entropy = torch.zeros((), device=device)
                for r, role in enumerate(ROLES):
                    logp, ent = logp_entropy(logits[role], mb["action"][:, r])
                    role_adv = adv if agents.centralised else adv[:, r]
                    policy_loss = policy_loss + clipped_surrogate(logp, mb["logp"][:, r], role_adv, args.clip)
                    entropy = entropy + ent.mean()
                value_loss = 0.5 * ((agents.value(mb["state"], views) - mb["ret"]) ** 2).mean()
                loss = policy_loss - args.entropy * entropy + args.value_loss * value_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agents.parameters(), args.max_grad_norm)
                optimizer.step()
        update_s += time.perf_counter() - mid

        out_of_time = bool(args.max_wall_s) and clock.wall() >= args.max_wall_s
        last = update == updates - 1 or out_of_time
        if frames >= next_eval or last:
            next_eval += args.eval_interval or args.frames
            report = evaluate(
                team_policy(agents, name),
                episodes=args.eval_episodes,
                seed=args.eval_seed,
                scenarios=args.scenarios,
                track="team",
            )
            row = eval_row(report, frames, clock)
            row["role_decisions"] = frames * len(ROLES)
            row["frames_per_s"] = round(frames / max(collect_s + update_s, 1e-9))
            row["train_score"] = round(float(np.mean(envs.scores)), 3) if envs.scores else None
            envs.scores.clear()
            rows.append(row)
            write_curve(rows, run_dir)
            if best is None or row["eval_score"] > best[0]["eval_score"]:
                best = (row, None)
                actors["best"] = export_actors(agents.actors, run_dir / "best")
                write_run(complete=False)
            if args.progress:
                print(
                    json.dumps(
                        {k: row[k] for k in ("timesteps", "eval_score", "frames_per_s", "train_score")}
                    ),
                    file=sys.stderr,
                )
        if last:
            break

    assert best is not None  # the last update always grades
    actors["final"] = export_actors(agents.actors, run_dir / "final")
    torch.save({"agents": agents.to("cpu").state_dict(), "args": args.as_json()}, run_dir / "final.pt")
    write_run(complete=True)
    return run_dir


def summary(run_dir: Path) -> dict[str, Any]:
    """What ``hospital-marl train fast-mappo`` prints: the run's metadata less the per-role files."""
    meta = json.loads((Path(run_dir) / METADATA_FILE).read_text())
    keys = ("algorithm", "frames", "wall_time_s", "cpu_time_s", "frames_per_s", "audit", "best", "command")
    return {"run_dir": str(run_dir), **{k: meta[k] for k in keys}}
