"""An LLM plays radiotherapy planning (SPEC.md §11 protocol, SPEC-RT §7).

    API_BASE_URL=... MODEL_NAME=... API_KEY=... python -m policies.radiotherapy.llm --task head_neck --seed 0

The reply parser is the package's one (:func:`policies.llm.parse_action`, the ED agent's: an
ambiguous reply is refused, not read as its first integer). The ``[START]/[STEP]/[END]``
lines are written by the package's one formatter (:mod:`policies.agent_protocol`, the ED
agent's), which escapes every free-text field (a model's error text can never add a line).

The prompt is a compact text rendering of the plan (the env's ``ansi`` summary: beams,
tumour metrics, every OAR against its limit, the score) and the numbered list of the
*legal* actions with their meaning, taken from THE action table
(:data:`~hospital_marl.radiotherapy.core.plan.ACTIONS`). The reply is parsed for one action
number; a reply naming none, or an illegal one, is logged with ``error=...`` and played as
the fallback (lock when a beam exists, else add one): counted, never a crash. One line per
event on stdout (flushed)::

    [START] task=<task> env=<env id> model=<model>
    [STEP] step=<n> action=<id> reward=<r:.2f> done=<true|false> error=<message|null>
    [END] success=<true|false> steps=<n> score=<s:.2f> rewards=<r1:.2f>,...

``score`` is the plan score (0–1); ``success`` is score ≥ the ``evenly_spaced`` baseline's
on the same patient. :class:`LLMRTPolicy` takes any ``complete(prompt) -> reply`` callable,
so it is a policy like the others (the grader grades it) and testable without a network.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import TextIO

import numpy as np

from hospital_marl.radiotherapy import task_env_id
from hospital_marl.radiotherapy.core.plan import ACTIONS, ADD, LOCK, Plan
from hospital_marl.radiotherapy.core.sealed import PlanView
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from hospital_marl.radiotherapy.envs.render import render_ansi
from policies.agent_protocol import Protocol, end_line, start_line, step_line
from policies.llm import ChatModel, LLMConfig, LLMUnavailableError
from policies.llm import parse_action as parse_reply
from policies.radiotherapy.base import BaseRTPolicy
from policies.radiotherapy.baselines import EvenlySpacedPolicy

SYSTEM_PROMPT = (
    "You are a radiotherapy planner. Cover the tumour with its prescription (D98 at least "
    "95 % and D2 at most 107 % of Rx, conformal) while keeping every organ at risk within its "
    "clinical dose-volume constraints; priority-1 (P1) organs must never fail. Beams enter from their "
    "gantry angle (0° anterior/top, 90° from the right of the image) and all aim at the tumour; each "
    "has an aperture (margin around the tumour) you can widen or narrow. Answer with one action "
    "number only."
)


def legal_actions_text(action_mask: np.ndarray) -> str:
    """The numbered legal actions and what they do (from the action table)."""
    return "\n".join(f"{a.id}: {a.name} — {a.doc}" for a in ACTIONS if action_mask[a.id])


def prompt(plan: Plan | PlanView, action_mask: np.ndarray) -> str:
    return f"{render_ansi(plan)}\n\nLegal actions:\n{legal_actions_text(action_mask)}\n\nYour action number:"


def parse_action(reply: str, action_mask: np.ndarray) -> tuple[int | None, str | None]:
    """THE package's reply parser (:func:`policies.llm.parse_action`, the ED agent's): (action, None)
    when the reply names one legal action, else (None, error): ``empty_reply``,
    ``no_action_number``, ``ambiguous_reply`` (two different numbers and nothing naming one) or
    ``illegal_action_<n>``."""
    return parse_reply(reply, {int(a) for a in np.flatnonzero(action_mask)})


def fallback(action_mask: np.ndarray) -> int:
    return LOCK if action_mask[LOCK] else ADD


class LLMRTPolicy(BaseRTPolicy):
    """An LLM as an RT policy: ``complete(prompt) -> reply`` answers each step."""

    name = "llm"

    def __init__(self, complete: Callable[[str], str], name: str | None = None) -> None:
        super().__init__()
        self.complete = complete
        self.last_error: str | None = None
        self.errors = 0
        if name:
            self.name = name

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        if self.plan is None:
            raise ValueError("the LLM reads the plan's summary: reset(seed, plan=env.unwrapped.plan)")
        mask = np.asarray(action_mask, bool)
        call_error = None
        try:
            reply = self.complete(prompt(self.plan, mask))
        except LLMUnavailableError:
            raise  # the endpoint is gone after its bounded retries: the run ends (success=false)
        except Exception as exc:  # a failed call is logged and played as the fallback, never a crash
            reply, call_error = "", f"llm_call_failed_{type(exc).__name__}"
        action, parse_error = parse_action(reply, mask)
        if action is None:
            self.errors += 1
            self.last_error = " ".join((call_error or parse_error or "").split())
            return fallback(mask)
        self.last_error = None
        return action


def chat_complete(chat: ChatModel) -> Callable[[str], str]:
    """A ``complete`` over the ED agents' :class:`~policies.llm.ChatModel` (the official ``openai``
    client with its request timeout and bounded retries)."""

    def complete(text: str) -> str:
        system = {"role": "system", "content": SYSTEM_PROMPT}
        return chat.complete([system, {"role": "user", "content": text}])

    return complete


def play(policy: LLMRTPolicy, task: str, seed: int, model: str, out: TextIO | None = None) -> float | None:
    """One episode with the protocol's log lines; returns the score (None: the endpoint failed)."""
    protocol = Protocol(out or sys.stdout)  # sys.stdout at call time (captured in tests)
    env = RadiotherapyPlanningEnv(task)
    obs, info = env.reset(seed=seed)
    policy.reset(seed=seed, plan=env.plan)
    protocol.emit(start_line(task, task_env_id(task), model))
    rewards: list[float] = []
    done = False
    while not done:
        try:
            action = policy.act(obs, info["action_mask"])
        except LLMUnavailableError as exc:
            print(f"llm agent: {exc}", file=sys.stderr)
            protocol.emit(end_line(False, len(rewards), 0.0, rewards))
            return None
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        rewards.append(reward)
        protocol.emit(step_line(len(rewards), action, reward, done, policy.last_error or None))
    reference = RadiotherapyPlanningEnv(task)
    ref_obs, ref_info = reference.reset(seed=seed)
    baseline = EvenlySpacedPolicy()
    baseline.reset(seed=seed, plan=reference.plan)
    while not reference.plan.done:
        ref_obs, _, _, _, ref_info = reference.step(baseline.act(ref_obs, ref_info["action_mask"]))
    score = info["score"]
    protocol.emit(end_line(score >= ref_info["score"], len(rewards), score, rewards))
    return score


def main(argv: list[str] | None = None) -> int:
    """One patient (``inference.py --env radiotherapy`` plays several tasks and episodes)."""
    parser = argparse.ArgumentParser(
        prog="python -m policies.radiotherapy.llm", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--task", default="prostate")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        config = LLMConfig.from_env()
        chat = ChatModel(config)
    except (ValueError, ImportError) as exc:
        print(f"llm agent: error: {exc}", file=sys.stderr)
        return 2
    score = play(LLMRTPolicy(chat_complete(chat), name=config.model), args.task, args.seed, config.model)
    return 0 if score is not None else 1


if __name__ == "__main__":
    sys.exit(main())
