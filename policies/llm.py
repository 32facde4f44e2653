"""Language models as policies, through any OpenAI-compatible chat API (SPEC §11).

``LLMPolicy`` plays both tracks: on the flat track one agent picks one of the
39 actions per tick; on the team track each role is its own agent, with its
own role prompt (and optionally its own model), picking from its own legal
actions. Each decision is one stateless chat request: a system prompt (the
role), one user message (:func:`hospital_marl.envs.text.render_prompt`: what
the role sees and its numbered legal actions), and the reply parsed by
:func:`parse_action`. A reply that names no legal action is played as the
no-op and counted (``stats``); an endpoint that keeps failing raises
:class:`LLMUnavailableError` after the client's bounded retries.

Connection settings come from arguments or from the environment:
``API_BASE_URL``, ``MODEL_NAME``, ``API_KEY`` (or ``HF_TOKEN``; a local server
that needs no key gets the placeholder ``"EMPTY"``, vLLM's convention).

    policies.load("llm:model=llama-3.3-70b,base_url=http://127.0.0.1:8000/v1")
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from hospital_marl.core.actions import ROLES
from hospital_marl.core.hospital import Hospital, SimulatorHandle
from hospital_marl.envs.text import estimate_tokens, render_prompt
from policies.base import BasePolicy, PolicyUnavailableError, role_blocks

# ------------------------------------------------------------------ prompts
_RULES = (
    "You work in a hospital emergency department during a 24-hour shift of 100 ticks. "
    "Patients have severity 1-5 (5 = resuscitation); severity 4-5 is critical: critical patients need an "
    "ICU bed, and a ventilator when they need one, or they deteriorate and die. General beds treat "
    "severity 1-3. Every death costs far more than a wait; an idle ventilator put on a patient who does "
    "not need it is wasted for 3 ticks. "
)
_ANSWER = (
    "Each turn you see the current state and the numbered legal actions. Reply with one action number only."
)

ROLE_PROMPTS: dict[str | None, str] = {
    None: "You are the charge nurse and decide ONE action per tick for the whole department: admit, "
    "transfer, discharge or ventilate. ",
    "triage": "You are the triage nurse: you decide which waiting patient goes to a general bed or an ICU "
    "bed. ",
    "bed_manager": "You are the bed manager: you transfer deteriorating general-ward patients to the ICU, "
    "step ready ICU patients down, and early-discharge mild patients when beds are short. ",
    "ventilator_officer": "You are the ventilator officer: you put a free ventilator on the most severe ICU "
    "patient without one, only when someone needs one. ",
}
"""System prompts: the flat agent's (key ``None``) and one per role; each gets the rules and answer format."""
assert set(ROLE_PROMPTS) == {None, *ROLES}


def system_prompt(role: str | None) -> str:
    return ROLE_PROMPTS[role] + _RULES + _ANSWER


def request_tokens(role: str | None, user_message: str) -> int:
    """Estimated prompt tokens of one decision's request: system prompt + user message (chars / 4)."""
    return estimate_tokens(system_prompt(role) + "\n" + user_message)


# ------------------------------------------------------------------ parsing
_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)
_ACTION_WORD = re.compile(r"\baction(?:[_ ]?(?:id|number))?\W{0,5}?(-?\d+)\b", re.IGNORECASE)
_NUMBER_LINE = re.compile(r"^\W*(-?\d+)\W*$")
_INTEGER = re.compile(r"(?<![\w.\[])-?\d+(?!\.\d|[\w\]])")


def _json_action(text: str) -> int | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict):
        for key in ("action", "action_id", "action_number"):
            if key in value:
                value = value[key]
                break
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def extract_number(reply: str | None) -> tuple[int | None, str | None]:
    """The one action number a reply names, or ``(None, error)``.

    In order: a JSON reply (``7`` or ``{"action": 7}``, also inside a code
    fence); the last ``action: 7`` / ``Action 7``; the last line that is only
    a number (``**7**``); the one integer in the reply (bracketed indices such
    as ``[3]`` are the prompt's slot names, not answers). Several candidate
    numbers and none of the forms above: ``ambiguous_reply``.
    """
    if not reply or not reply.strip():
        return None, "empty_reply"
    text = reply.strip()
    for candidate in (text, *_FENCE.findall(text)):
        number = _json_action(candidate.strip())
        if number is not None:
            return number, None
    unfenced = _FENCE.sub(lambda m: m.group(1), text)
    named = _ACTION_WORD.findall(unfenced)
    if named:
        return int(named[-1]), None
    alone = [m.group(1) for line in unfenced.splitlines() if (m := _NUMBER_LINE.match(line.strip()))]
    if alone:
        return int(alone[-1]), None
    integers = set(_INTEGER.findall(unfenced))
    if len(integers) == 1:
        return int(integers.pop()), None
    return None, "no_action_number" if not integers else "ambiguous_reply"


def parse_action(reply: str | None, legal: Collection[int]) -> tuple[int | None, str | None]:
    """``(action, None)`` when the reply names one legal action, else ``(None, error)``:
    ``empty_reply``, ``no_action_number``, ``ambiguous_reply`` or ``illegal_action_<n>``."""
    number, error = extract_number(reply)
    if number is None:
        return None, error
    if number not in legal:
        return None, f"illegal_action_{number}"
    return number, None


# ---------------------------------------------------------------- the client
class LLMUnavailableError(PolicyUnavailableError):
    """The endpoint failed (timeouts, connection errors, 5xx) after the bounded retries."""


DEFAULT_BASE_URL = "https://router.huggingface.co/v1"
"""The hackathon convention's ``API_BASE_URL`` default (Hugging Face's OpenAI-compatible router)."""
DEFAULT_MODEL = "Qwen/Qwen2.5-72B-Instruct"
"""The hackathon convention's ``MODEL_NAME`` default."""
KEY_VARIABLES = ("API_KEY", "HF_TOKEN", "OPENAI_API_KEY")
"""Where the key is read from, first set wins."""


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to ask. ``from_env`` fills what is not given from the environment."""

    model: str
    base_url: str
    api_key: str = "EMPTY"
    temperature: float = 0.0
    max_tokens: int = 64
    timeout_s: float = 30.0
    max_retries: int = 2

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("no model: set MODEL_NAME or pass model=")
        if not self.base_url:
            raise ValueError(
                "no endpoint: set API_BASE_URL (e.g. http://127.0.0.1:8000/v1) or pass base_url="
            )
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature!r}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens!r}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s!r}")
        if not 0 <= self.max_retries <= 10:
            raise ValueError(f"max_retries must be in 0..10, got {self.max_retries!r}")

    @classmethod
    def from_env(cls, **given: Any) -> LLMConfig:
        """``API_BASE_URL`` and ``MODEL_NAME`` (else the hackathon defaults), ``API_KEY`` (else
        ``HF_TOKEN``, else ``OPENAI_API_KEY``) for what ``given`` lacks."""
        values = {k: v for k, v in given.items() if v is not None}
        values.setdefault("model", os.environ.get("MODEL_NAME") or DEFAULT_MODEL)
        values.setdefault("base_url", os.environ.get("API_BASE_URL") or DEFAULT_BASE_URL)
        key = next((os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
        if key:
            values.setdefault("api_key", key)
        values["model"] = str(values["model"])
        return cls(**values)


@dataclass
class Traffic:
    """What reaching the endpoint cost: every HTTP attempt the client made, counted as it went."""

    calls: int = 0  # chat completions asked for
    attempts: int = 0  # HTTP requests sent (a retry is another attempt)
    server_errors: int = 0  # 5xx answers
    rate_limited: int = 0  # 429 answers
    timeouts: int = 0  # attempts that timed out
    failures: int = 0  # calls that failed after every retry

    @property
    def retries(self) -> int:
        return max(0, self.attempts - self.calls)

    def as_dict(self) -> dict[str, int]:
        return {
            "calls": self.calls, "attempts": self.attempts, "retries": self.retries,
            "server_errors": self.server_errors, "rate_limited": self.rate_limited,
            "timeouts": self.timeouts, "failures": self.failures,
        }  # fmt: skip


class ChatModel:
    """One OpenAI-compatible chat endpoint through the official ``openai`` client.

    Retries are the client's own: connection errors, timeouts, 408/409/429 and
    5xx are retried ``max_retries`` times with exponential backoff; then
    :class:`LLMUnavailableError`. A request never waits longer than ``timeout_s``.
    """

    def __init__(self, config: LLMConfig) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openenv-core brings it; the `llm` extra names it
            raise ImportError(
                f'LLM agents need the `llm` extra: pip install -e ".[llm]" from a clone ({exc})'
            ) from exc

        import httpx

        # httpx (not a core dependency) only when a model is reached: this module loads with every policy
        from policies._http import CountingTransport

        self.config = config
        self._openai = openai
        self.traffic = Traffic()
        self.client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key,
            timeout=config.timeout_s,
            max_retries=config.max_retries,
            # openai annotates http_client as its httpx2.Client only, yet checks for and takes an
            # httpx.Client too (openai._base_client); httpx also works with openai 1.x
            http_client=httpx.Client(  # type: ignore[arg-type]
                transport=CountingTransport(self.traffic), timeout=config.timeout_s
            ),
        )

    def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """The reply message (``.content``, ``.tool_calls``) of one chat completion."""
        self.traffic.calls += 1
        try:
            response = self.client.chat.completions.create(
                model=self.config.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=self.config.temperature,
                max_tokens=self.config.max_tokens,
                **kwargs,
            )
        except self._openai.APIError as exc:
            self.traffic.failures += 1
            raise LLMUnavailableError(
                f"{type(exc).__name__} from {self.config.base_url} after {self.config.max_retries} "
                f"retries: {exc}"
            ) from exc
        if not response.choices:
            return None
        return response.choices[0].message

    def complete(self, messages: list[dict[str, Any]]) -> str:
        """The reply's text ('' when the model sent none)."""
        message = self.chat(messages)
        return (message.content or "") if message is not None else ""


# ------------------------------------------------------------------ policy
@dataclass
class Decision:
    """One decision: what was asked, what came back, what was played."""

    role: str | None
    prompt: str
    reply: str
    action: int
    error: str | None
    latency_s: float
    system: str | None = None  # when not the agent's own system prompt (e.g. the MCP tool-calling one)
    asked: bool = True  # False: only one action was legal, so no request was sent


@dataclass
class LLMStats:
    """Counts over a policy's decisions: unusable replies by kind, estimated prompt tokens sent."""

    decisions: int = 0
    invalid_replies: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0  # system + user message, characters / 4
    not_asked: int = 0  # decisions where only one action was legal: no request sent

    @property
    def asked(self) -> int:
        return self.decisions - self.not_asked

    @property
    def unusable_rate(self) -> float:
        """Unusable replies per request sent (0 when none was sent)."""
        return self.invalid_replies / self.asked if self.asked else 0.0

    def record(self, decision: Decision) -> None:
        self.decisions += 1
        if not decision.asked:
            self.not_asked += 1
            return
        if decision.system is None:
            self.prompt_tokens += request_tokens(decision.role, decision.prompt)
        else:
            self.prompt_tokens += estimate_tokens(decision.system + "\n" + decision.prompt)
        if decision.error is not None:
            self.invalid_replies += 1
            kind = decision.error.rsplit("_", 1)[0] if decision.error[-1].isdigit() else decision.error
            self.errors[kind] = self.errors.get(kind, 0) + 1


class LLMAgent:
    """One role's (or the flat track's) agent: its system prompt, its model, its decisions."""

    def __init__(self, role: str | None, model: ChatModel) -> None:
        self.role = role
        self.model = model
        self.system = system_prompt(role)

    def decide(self, blocks: Mapping[str, Any], mask: Any, episode_length: int | None = None) -> Decision:
        """Ask once; an unusable reply is the no-op (0) with its error. When only one action is
        legal (the no-op, most ticks of a quiet night) nothing is asked: it is played, counted."""
        legal = set(np.flatnonzero(np.asarray(mask, dtype=bool)).tolist())
        if len(legal) == 1:
            return Decision(self.role, "", "", legal.pop(), None, 0.0, asked=False)
        prompt = render_prompt(blocks, mask, self.role, episode_length)
        started = time.perf_counter()
        reply = self.model.complete(
            [{"role": "system", "content": self.system}, {"role": "user", "content": prompt}]
        )
        action, error = parse_action(reply, legal)
        return Decision(
            self.role, prompt, reply, 0 if action is None else action, error, time.perf_counter() - started
        )


class LLMPolicy(BasePolicy):
    """A language model as a policy, graded like any other (``grade``, ``compare``).

    Args:
        model, base_url, api_key: the endpoint (default: ``MODEL_NAME``, ``API_BASE_URL``,
            ``API_KEY`` / ``HF_TOKEN``).
        temperature, max_tokens, timeout_s, max_retries: per request (see :class:`LLMConfig`).
        transcript: a JSONL file; every decision's prompts, raw reply, action and error are appended.
        triage_model, bed_manager_model, ventilator_officer_model: a different model for one role
            on the team track (same endpoint).

    ``stats`` counts decisions and unusable replies since construction.
    """

    name = "llm"
    tracks = ("flat", "team")

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout_s: float | None = None,
        max_retries: int | None = None,
        transcript: str | Path | None = None,
        **role_models: str,
    ) -> None:
        super().__init__()
        unknown = set(role_models) - {f"{r}_model" for r in ROLES}
        if unknown:
            raise ValueError(f"unknown LLMPolicy arguments {sorted(unknown)}; roles: {', '.join(ROLES)}")
        self.config = LLMConfig.from_env(
            model=model,
            base_url=base_url,
            api_key=api_key,
            temperature=temperature,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
            max_retries=max_retries,
        )
        shared = ChatModel(self.config)
        self.agents: dict[str | None, LLMAgent] = {None: LLMAgent(None, shared)}
        for role in ROLES:
            own = role_models.get(f"{role}_model")
            model_for_role = ChatModel(replace(self.config, model=str(own))) if own else shared
            self.agents[role] = LLMAgent(role, model_for_role)
        self.transcript = Path(transcript) if transcript else None
        self.stats = LLMStats()
        self.episode = -1
        own = ",".join(f"{r}={m}" for r in ROLES if (m := role_models.get(f"{r}_model")))
        self.name = f"llm({self.config.model}{'; ' + own if own else ''})"

    def reset(self, seed: int | None = None, hospital: Hospital | SimulatorHandle | None = None) -> None:
        super().reset(seed, hospital)
        self.episode += 1

    def _episode_length(self) -> int | None:
        return self.hospital.max_ticks if self.hospital is not None else None

    @property
    def traffic(self) -> dict[str, int]:
        """Endpoint traffic over every model this policy asks (shared or per role), summed."""
        models = {id(a.model): a.model for a in self.agents.values()}.values()
        total: dict[str, int] = {}
        for model in models:
            for key, value in model.traffic.as_dict().items():
                total[key] = total.get(key, 0) + value
        return total

    def report_metrics(self) -> dict[str, float]:
        """What a grade report shows beside the env's metrics: how usable the replies were."""
        return {
            "unusable_reply_rate": self.stats.unusable_rate,
            "requests_not_sent": float(self.stats.not_asked),
        }

    def write_summary(self, **extra: Any) -> None:
        """Append a summary row (counts and endpoint traffic) to the transcript, if any."""
        if self.transcript is not None:
            row = {
                "event": "summary", "episode": self.episode, "decisions": self.stats.decisions,
                "unusable_replies": self.stats.invalid_replies, "not_asked": self.stats.not_asked,
                "traffic": self.traffic, **extra,
            }  # fmt: skip
            with self.transcript.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")

    def record(self, decision: Decision, tick: int | None = None) -> None:
        """Count a decision and append it to the transcript (if any; not for decisions never asked)."""
        self.stats.record(decision)
        if self.transcript is not None and decision.asked:
            row = {
                "episode": self.episode,
                "tick": tick,
                "role": decision.role,
                "model": self.agents[decision.role].model.config.model,
                "system": decision.system or self.agents[decision.role].system,
                "prompt": decision.prompt,
                "reply": decision.reply,
                "action": decision.action,
                "error": decision.error,
                "latency_s": round(decision.latency_s, 4),
            }
            with self.transcript.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")

    def decide(
        self, role: str | None, blocks: Mapping[str, Any], mask: Any, tick: int | None = None
    ) -> Decision:
        """One recorded decision of ``role`` (None: the flat agent) on these blocks and mask."""
        decision = self.agents[role].decide(blocks, mask, self._episode_length())
        self.record(decision, tick)
        return decision

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return self.decide(None, observation, action_mask, _tick(observation)).action

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        blocks = role_blocks(role, np.asarray(observation))
        return self.decide(role, blocks, action_mask, _tick(blocks)).action


def _tick(blocks: Mapping[str, Any]) -> int | None:
    return int(np.asarray(blocks["time_step"]).ravel()[0]) if "time_step" in blocks else None


__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "ROLE_PROMPTS",
    "ChatModel",
    "Decision",
    "LLMAgent",
    "LLMConfig",
    "LLMPolicy",
    "LLMUnavailableError",
    "Traffic",
    "extract_number",
    "parse_action",
    "request_tokens",
    "system_prompt",
]
