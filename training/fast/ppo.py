"""Masked PPO on the natively batched envs, in one file: ``hospital-marl train fast-ppo``.

CleanRL-style: the arguments (:class:`training.fast.args.PpoArgs`), then the loop. B departments
step together (:class:`~hospital_marl.envs.vector.HospitalEDVectorEnv` for the flat track,
:class:`~hospital_marl.envs.vector.HospitalEDTeamVectorEnv` for the team track; one vector per
scenario with ``--all-scenarios``), observations go through the same feature encoder as the shipped
``ppo`` / ``team_ppo`` (:func:`policies.learned.encode_batch`, row for row
:class:`~policies.learned.FeatureEncoder`), actions are sampled from masked categoricals (team: three
of them, one per role's segment of the 41 logits, the joint log-probability their sum).

Checkpoint choice grades on validation days (``--eval-seed``) every ``--eval-interval`` frames with
the evaluation function :func:`train` is given. A run directory gets ``best_model.onnx`` +
``best_model.json`` (what :func:`policies.learned.load_path` loads: ``policies.load(run_dir)``),
``model.onnx`` + ``model.json`` (the end of training), ``final.pt`` and ``curve.json`` / ``curve.csv``.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hospital_marl.core.actions import N_FLAT_ACTIONS, ROLE_ACTION_COUNTS, ROLES
from hospital_marl.envs.vector import HospitalEDTeamVectorEnv, HospitalEDVectorEnv
from policies.learned import ENCODER_VERSION, FEATURE_SIZE, PPOPolicy, TeamPPOPolicy, encode_batch
from training.common import Clock, Evaluate, eval_row, require_evaluate, reward_table, write_curve, write_json
from training.fast.args import SEED_BASE
from training.fast.args import PpoArgs as Args
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

SEGMENTS = {
    "flat": [slice(0, N_FLAT_ACTIONS)],
    "team": [
        slice(start, start + ROLE_ACTION_COUNTS[role])
        for role, start in zip(ROLES, np.cumsum([0] + [ROLE_ACTION_COUNTS[r] for r in ROLES]))
    ],
}
"""The action heads of each track as segments of the logits (flat: one of 39; team: 21 | 16 | 4)."""


class Departments:
    """``num_envs`` departments as one batch: a vector env per scenario, rows concatenated."""

    def __init__(self, args: Args) -> None:
        names = args.scenarios
        base, extra = divmod(args.num_envs, len(names))
        self.rows = [base + (k < extra) for k in range(len(names))]
        cls = HospitalEDTeamVectorEnv if args.track == "team" else HospitalEDVectorEnv
        rewards = reward_table(args.reward_overrides)
        self.vecs = [cls(n, scenario=s, rewards=rewards) for n, s in zip(self.rows, names)]
        self.scores: list[float] = []
        self._observe(
            [
                vec.reset(seed=SEED_BASE + args.seed * 100_000 + k * 10_000)[0]
                for k, vec in enumerate(self.vecs)
            ]
        )

    def _observe(self, observations: list[dict[str, np.ndarray]]) -> None:
        """The batch's encoded features ``(B, FEATURE_SIZE)`` and masks ``(B, 39 | 41)``."""
        self.features = np.concatenate([encode_batch(obs) for obs in observations])
        self.masks = np.concatenate([vec.action_masks() for vec in self.vecs]).astype(bool)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions ``(B,)`` or ``(B, 3)`` -> rewards ``(B,)`` and episode ends ``(B,)``."""
        observations, rewards, dones, start = [], [], [], 0
        for vec, n in zip(self.vecs, self.rows):
            obs, rew, term, trunc, info = vec.step(actions[start : start + n])
            start += n
            observations.append(obs)
            rewards.append(rew)
            dones.append(term | trunc)
            if "final_info" in info:
                final = info["final_info"]
                self.scores.extend(final["score"][final["_score"]].tolist())
        self._observe(observations)
        return np.concatenate(rewards), np.concatenate(dones)


class ActorCritic(nn.Module):
    def __init__(self, args: Args) -> None:
        super().__init__()
        n_actions = SEGMENTS[args.track][-1].stop
        self.actor = mlp([FEATURE_SIZE, *args.hidden, n_actions], 0.01)
        self.critic = mlp([FEATURE_SIZE, *args.hidden, 1], 1.0)
        self.segments = SEGMENTS[args.track]


class _TorchActor:
    """The actor as :class:`policies.learned.Logits` (one feature vector -> logits) for grading."""

    def __init__(self, actor: nn.Module) -> None:
        self.actor = copy.deepcopy(actor).to("cpu").eval()

    def __call__(self, features: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.actor(torch.as_tensor(np.asarray(features, np.float32)).reshape(1, -1))[0].numpy()


class Rollout:
    """One rollout's tensors ``(T, B, ...)`` and the masked-action audit, filled by :meth:`collect`."""

    def __init__(self, args: Args, segments: Sequence[slice], device: torch.device) -> None:
        T, B, H = args.steps, args.num_envs, len(segments)
        self.args, self.segments, self.device = args, segments, device
        self.features = torch.zeros((T, B, FEATURE_SIZE), device=device)
        self.masks = torch.zeros((T, B, segments[-1].stop), dtype=torch.bool, device=device)
        self.actions = torch.zeros((T, B, H), dtype=torch.long, device=device)
        self.logps = torch.zeros((T, B), device=device)
        self.values = torch.zeros((T, B), device=device)
        self.rewards = torch.zeros((T, B), device=device)
        self.dones = torch.zeros((T, B), device=device)
        self.masked_taken = 0

    def collect(self, net: ActorCritic, envs: Departments, gen: torch.Generator) -> None:
        """``steps`` ticks of every department, actions sampled from the masked heads."""
        args, device = self.args, self.device
        for t in range(args.steps):
            x = torch.from_numpy(envs.features).to(device)
            mask = torch.from_numpy(envs.masks).to(device)
            with torch.no_grad():
                drawn = [sample(logits, gen) for logits in heads(net, x, mask)]
                self.values[t] = net.critic(x).squeeze(-1)
            action = torch.stack([a for a, _ in drawn], dim=1)
            self.features[t], self.masks[t], self.actions[t] = x, mask, action
            self.logps[t] = sum(lp for _, lp in drawn)
            for h, seg in enumerate(self.segments):
                self.masked_taken += int((~mask[:, seg].gather(1, action[:, h : h + 1])).sum())
            step_actions = action.cpu().numpy()
            reward, done = envs.step(step_actions[:, 0] if args.track == "flat" else step_actions)
            self.rewards[t] = torch.from_numpy(reward * args.reward_scale).to(device)
            self.dones[t] = torch.from_numpy(done.astype(np.float32)).to(device)

    def advantages(self, net: ActorCritic, envs: Departments) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE advantages and returns, bootstrapped from the state after the last tick."""
        with torch.no_grad():
            next_value = net.critic(torch.from_numpy(envs.features).to(self.device)).squeeze(-1)
            advantages = gae(
                self.rewards, self.values, self.dones, next_value, self.args.gamma, self.args.gae_lambda
            )
        return advantages, advantages + self.values


def heads(net: ActorCritic, x: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """The actor's masked logits, one tensor per action head (flat: one; team: the three roles)."""
    logits = net.actor(x)
    return [masked(logits[:, seg], mask[:, seg]) for seg in net.segments]


def update(
    net: ActorCritic,
    optimizer: torch.optim.Optimizer,
    buf: Rollout,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    args: Args,
    gen: torch.Generator,
) -> None:
    """PPO's update on one rollout: ``args.epochs`` passes of shuffled minibatches."""
    T, B, H = buf.actions.shape
    n = T * B
    flat = {
        "x": buf.features.reshape(n, FEATURE_SIZE),
        "mask": buf.masks.reshape(n, -1),
        "action": buf.actions.reshape(n, H),
        "logp": buf.logps.reshape(n),
        "adv": advantages.reshape(n),
        "ret": returns.reshape(n),
    }
    device = advantages.device
    for _ in range(args.epochs):
        order = torch.randperm(n, generator=gen, device=device)
        for lo in range(0, n, args.minibatch):
            mb = {k: v[order[lo : lo + args.minibatch]] for k, v in flat.items()}
            logp = entropy = torch.zeros((), device=device)
            for h, logits in enumerate(heads(net, mb["x"], mb["mask"])):
                head_logp, head_entropy = logp_entropy(logits, mb["action"][:, h])
                logp, entropy = logp + head_logp, entropy + head_entropy.mean()
            adv = (mb["adv"] - mb["adv"].mean()) / (mb["adv"].std() + 1e-8)
            policy_loss = clipped_surrogate(logp, mb["logp"], adv, args.clip)
            value_loss = 0.5 * ((net.critic(mb["x"]).squeeze(-1) - mb["ret"]) ** 2).mean()
            loss = policy_loss - args.entropy * entropy + args.value_loss * value_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)
            optimizer.step()


def write_run(
    args: Args,
    net: ActorCritic,
    best: tuple[dict[str, Any], nn.Module],
    last: dict[str, Any],
    figures: dict[str, Any],
) -> None:
    """The run directory: the best-validation and the final actor as ONNX with their metadata, and
    ``final.pt``. ``figures``: name, frames, the clock, the phases' seconds, the masked-action audit."""
    frames, clock = figures["frames"], figures["clock"]
    meta = {
        "name": figures["name"],
        "track": args.track,
        "masked": True,
        "encoder_version": ENCODER_VERSION,
        "trainer": "fast",
        "timesteps": frames,
        "wall_time_s": clock.wall(),
        "cpu_time_s": clock.cpu(),
        "frames_per_s": round(frames / max(figures["collect_s"] + figures["update_s"], 1e-9)),
        "audit": {
            "masked_actions_taken": figures["masked_taken"],
            "audited_actions": frames * len(net.segments),
        },
        "validation": {"seed": args.eval_seed, "episodes_per_scenario": args.eval_episodes},
        "args": args.as_json(),
        "command": args.command_line(),
    }
    run_dir = args.run_dir
    for stem, actor, row in (("best_model", best[1], best[0]), ("model", net.actor, last)):
        export_onnx(actor, FEATURE_SIZE, run_dir / f"{stem}.onnx")
        write_json(run_dir / f"{stem}.json", {**meta, "eval": row})
    torch.save({"net": net.to("cpu").state_dict(), "args": args.as_json()}, run_dir / "final.pt")


def train(args: Args, evaluate: Evaluate) -> Path:
    """Train masked PPO from scratch; grade on validation days; write the run directory."""
    require_evaluate(evaluate, "train(Args(...), grading.grade)")
    device = pick_device(args.device)
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    run_dir = args.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    name = f"fast_ppo_{args.track}"
    policy_cls = TeamPPOPolicy if args.track == "team" else PPOPolicy

    envs = Departments(args)
    net = ActorCritic(args).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=args.learning_rate, eps=1e-5)
    per_update = args.num_envs * args.steps
    updates = -(-args.frames // per_update)
    buf = Rollout(args, net.segments, device)

    clock, rows, best = Clock(), [], None
    fig: dict[str, Any] = {"name": name, "clock": clock, "frames": 0, "collect_s": 0.0, "update_s": 0.0}
    next_eval = args.eval_interval if args.eval_interval else args.frames
    for number in range(updates):
        if args.anneal_lr:
            spent = max(number / updates, clock.wall() / args.max_wall_s if args.max_wall_s else 0.0)
            optimizer.param_groups[0]["lr"] = args.learning_rate * max(1.0 - spent, 0.0)
        started = time.perf_counter()
        buf.collect(net, envs, gen)
        fig["frames"] += per_update
        advantages, returns = buf.advantages(net, envs)
        mid = time.perf_counter()
        fig["collect_s"] += mid - started
        update(net, optimizer, buf, advantages, returns, args, gen)
        fig["update_s"] += time.perf_counter() - mid

        out_of_time = bool(args.max_wall_s) and clock.wall() >= args.max_wall_s
        last = number == updates - 1 or out_of_time
        if fig["frames"] >= next_eval or last:
            next_eval += args.eval_interval or args.frames
            report = evaluate(
                policy_cls(_TorchActor(net.actor), name=name),
                episodes=args.eval_episodes,
                seed=args.eval_seed,
                scenarios=args.scenarios,
                track=args.track,
            )
            row = eval_row(report, fig["frames"], clock)
            row["frames_per_s"] = round(fig["frames"] / max(fig["collect_s"] + fig["update_s"], 1e-9))
            row["train_score"] = round(float(np.mean(envs.scores)), 3) if envs.scores else None
            envs.scores.clear()
            rows.append(row)
            write_curve(rows, run_dir)
            if best is None or row["eval_score"] > best[0]["eval_score"]:
                best = (row, copy.deepcopy(net.actor).to("cpu"))
            if args.progress:
                keys = ("timesteps", "eval_score", "frames_per_s", "train_score")
                print(json.dumps({k: row[k] for k in keys}), file=sys.stderr)
        if last:
            break

    assert best is not None  # the last update always grades
    write_run(args, net, best, rows[-1], {**fig, "masked_taken": buf.masked_taken})
    return run_dir


def summary(run_dir: Path) -> dict[str, Any]:
    """What ``hospital-marl train fast-ppo`` prints."""
    meta = json.loads((Path(run_dir) / "best_model.json").read_text())
    keys = ("track", "timesteps", "wall_time_s", "cpu_time_s", "frames_per_s", "audit", "eval", "command")
    return {"run_dir": str(run_dir), **{k: meta[k] for k in keys}}
