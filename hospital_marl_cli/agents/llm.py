"""The LLM agent script (SPEC §11): ``python inference.py`` and ``hospital-marl llm``.

A language model behind any OpenAI-compatible chat API plays shifts of the
emergency department, in-process or against a running server, and stdout
carries exactly one line per event (flushed)::

    [START] task=<scenario> env=<env id> model=<model name>
    [STEP] step=<n> action=<action id> reward=<r:.2f> done=<true|false> error=<message|null>
    [END] success=<true|false> steps=<n> score=<s:.2f> rewards=<r1:.2f>,<r2:.2f>,...

Everything else (settings, per-episode summaries, failures) goes to stderr. The lines are
written by :mod:`policies.agent_protocol`, which escapes every free-text field (a model's
tool name or argument, the model name): nothing a model replies can add a line.

- ``action``: the flat action (0..38); on the team track the three role actions
  in role order, ``triage,bed_manager,ventilator_officer`` (each role's own
  numbering, as the team env's ``MultiDiscrete`` action).
- ``error``: ``null``, or why a reply was played as the no-op:
  ``empty_reply``, ``no_action_number``, ``ambiguous_reply``, ``illegal_action_<n>``
  (MCP mode also ``refused_<tool>``, ``unknown_tool_<name>``, ``bad_arguments``);
  on the team track ``<role>:<error>`` joined by ``;``. Such replies are counted
  (stderr summary, transcript) and cost nothing in the env.
- ``score``: the episode's graded composite / 100. ``success``: score ≥ the
  heuristic's score on the same day (same scenario and seed; the team track
  compares with ``team_heuristic`` on the grader's team track).
- Episode ``i`` of a scenario is the grader's day ``episode_seed(seed, scenario, i)``,
  so a run is comparable with ``hospital-marl evaluate --seed``.

The endpoint failing (connection errors, timeouts, 5xx after the ``openai``
client's bounded retries) or the server failing ends that episode with
``[END] success=false`` (score 0.00); the other tasks are still played, and the
process exits with status 1. Retries, 5xx answers and timeouts are counted and
reported on stderr and in the transcript. Bad settings print a ``[START]`` and an
``[END] success=false`` line for every task asked for, then exit with status 2.
When only the no-op is legal no request is sent (counted).

Defaults follow the hackathon convention: ``API_BASE_URL`` (else Hugging Face's
router), ``MODEL_NAME`` (else :data:`policies.llm.DEFAULT_MODEL`), the key from
``API_KEY``, ``HF_TOKEN`` or ``OPENAI_API_KEY``; every built-in scenario (task).

Tracks: ``flat`` is one agent, one action per tick. ``team`` is one agent per
role, each with its own role prompt: in-process through the AEC env (roles in
turn, each seeing the previous one's effect: the grader's team track), with
``--server`` through the server's team step (the three roles decide on the
same state). ``--mcp`` (with ``--server``) plays the flat track through the
server's MCP tools with tool calls (``server/mcp_tools.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hospital_marl.core.actions import NOOP, ROLE_FLAT, ROLES
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS, SCENARIOS
from hospital_marl.envs.text import estimate_tokens
from policies.agent_protocol import Protocol, end_line, start_line, step_line

FLAT_ENV_ID = "hospital_marl/HospitalED-v0"
TEAM_ENV_ID = "hospital_marl/HospitalEDTeam-v0"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


# ----------------------------------------------------------- the protocol
def diag(message: str) -> None:
    print(f"[llm] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------- options
@dataclass(frozen=True)
class AgentOptions:
    """What one run plays. Endpoint settings default to ``API_BASE_URL``, ``MODEL_NAME``, ``API_KEY``."""

    scenarios: tuple[str, ...] = BUILTIN_SCENARIOS
    seed: int = 0
    episodes: int = 1
    track: str = "flat"
    server: str | None = None  # a running server's base URL; None: in-process
    mcp: bool = False  # play through the server's MCP tools (needs server)
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int = 64
    timeout_s: float = 30.0
    max_retries: int = 2
    transcript: str | None = None  # JSONL of every prompt and raw reply
    role_models: tuple[tuple[str, str], ...] = ()  # (role, model) overrides on the team track

    def __post_init__(self) -> None:
        for name in self.scenarios:
            if name not in SCENARIOS:
                raise ValueError(f"unknown scenario {name!r}; valid names: {', '.join(SCENARIOS)}")
        if not self.scenarios:
            raise ValueError("no scenarios")
        if self.track not in ("flat", "team"):
            raise ValueError(f"track must be flat or team, got {self.track!r}")
        if self.episodes < 1 or self.seed < 0:
            raise ValueError("episodes must be >= 1 and seed >= 0")
        if self.mcp and not self.server:
            raise ValueError("--mcp plays through a running server's MCP tools: give --server URL")
        for role, model in self.role_models:
            if role not in ROLES or not model:
                raise ValueError(
                    f"--role-model takes ROLE=MODEL with a role of {', '.join(ROLES)}, got {role}={model}"
                )
        if self.role_models and self.track != "team":
            raise ValueError("--role-model sets a role's model on the team track: add --track team")
        if self.mcp and self.track != "flat":
            raise ValueError("--mcp plays the flat track (one tool call per tick)")


@dataclass
class EpisodeRecord:
    """What one episode printed and measured (also returned to callers such as notebooks)."""

    scenario: str
    seed: int
    steps: int = 0
    rewards: list[float] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    score: float | None = None  # 0-100, None when the episode failed
    heuristic_score: float | None = None
    success: bool = False
    failure: str | None = None
    prompt_tokens: list[int] = field(default_factory=list)  # per step, all roles' prompts (chars / 4)

    @property
    def invalid_replies(self) -> int:
        return sum(e is not None for e in self.errors)


class EpisodeFailure(RuntimeError):
    """The endpoint or the server failed: the episode cannot go on."""


# ------------------------------------------------------------- drivers
class _InProcessFlat:
    def __init__(self, scenario: str) -> None:
        from hospital_marl.envs.composed import HospitalEDEnv

        self.env = HospitalEDEnv(scenario=scenario)

    def reset(self, seed: int) -> None:
        self.obs, self.info = self.env.reset(seed=seed)

    @property
    def episode_length(self) -> int:
        return self.env.hospital.max_ticks

    def observe(self, role: str | None) -> tuple[Mapping[str, Any], Any]:
        return self.obs, self.info["action_mask"]

    def play(self, actions: Mapping[str | None, int]) -> tuple[float, bool]:
        self.obs, reward, terminated, truncated, self.info = self.env.step(actions[None])
        return float(reward), bool(terminated or truncated)

    def score(self) -> float:
        return float(self.env.hospital.score())


class _InProcessTeam:
    """The AEC env, as the grader's team track: each role acts on the state its predecessors left."""

    sequential = True

    def __init__(self, scenario: str) -> None:
        from hospital_marl.envs.aec import HospitalAECEnv

        self.env = HospitalAECEnv(scenario=scenario)

    def reset(self, seed: int) -> None:
        self.env.reset(seed=seed)
        self._before = self.env.hospital.counters.cumulative_reward

    @property
    def episode_length(self) -> int:
        return self.env.hospital.max_ticks

    def observe(self, role: str | None) -> tuple[Mapping[str, Any], Any]:
        from policies.base import role_blocks

        assert role is not None and self.env.agent_selection == role
        obs = self.env.observe(role)
        return role_blocks(role, obs["observation"]), obs["action_mask"]

    def act_role(self, role: str, action: int) -> None:
        self.env.step(action)

    def play(self, actions: Mapping[str | None, int]) -> tuple[float, bool]:
        hospital = self.env.hospital
        reward = hospital.counters.cumulative_reward - self._before
        self._before = hospital.counters.cumulative_reward
        return float(reward), bool(hospital.done)

    def score(self) -> float:
        return float(self.env.hospital.score())


class _Remote:
    """A running server over the WebSocket (``server.client.HospitalClient``)."""

    def __init__(self, url: str, scenario: str, track: str) -> None:
        from server.client import HospitalClient

        self.scenario, self.track = scenario, track
        self._client = HospitalClient(url)
        self.env = self._client.__enter__()

    def close(self) -> None:
        self._client.__exit__(None, None, None)

    def reset(self, seed: int) -> None:
        self.obs = self.env.reset(seed=seed, scenario=self.scenario).observation
        self.episode_length = self.env.state().max_ticks

    def observe(self, role: str | None) -> tuple[Mapping[str, Any], Any]:
        from hospital_marl.envs.observations import ROLE_BLOCKS
        from server.mcp_tools import observation_blocks

        blocks, mask = observation_blocks(self.obs), self.obs.action_mask
        if role is None:
            return blocks, mask
        return {k: blocks[k] for k in ROLE_BLOCKS[role]}, [mask[f] for f in ROLE_FLAT[role]]

    def play(self, actions: Mapping[str | None, int]) -> tuple[float, bool]:
        action: Any = actions[None] if self.track == "flat" else {role: actions[role] for role in ROLES}
        self.obs = self.env.step(action).observation
        return float(self.obs.reward or 0.0), bool(self.obs.done)

    def score(self) -> float:
        return float(self.obs.info["score"])


# --------------------------------------------------------------- agent
class LLMAgentRunner:
    """Plays episodes with an :class:`~policies.llm.LLMPolicy` and prints the protocol."""

    def __init__(self, options: AgentOptions, protocol: Protocol | None = None) -> None:
        from policies.llm import LLMPolicy

        self.options = options
        self.protocol = protocol or Protocol()
        self.policy = LLMPolicy(
            model=options.model,
            base_url=options.base_url,
            api_key=options.api_key,
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            timeout_s=options.timeout_s,
            max_retries=options.max_retries,
            transcript=options.transcript,
            **{f"{role}_model": model for role, model in options.role_models},
        )
        self._baselines: dict[tuple[str, str, int], float] = {}

    @property
    def model_name(self) -> str:
        """The [START] line's model: the shared one, then any per-role ones (``;role=model``)."""
        return self.policy.config.model + "".join(f";{r}={m}" for r, m in self.options.role_models)

    def run(self) -> tuple[int, list[EpisodeRecord]]:
        """Every episode of every scenario, each whatever became of the others.

        Returns (exit status: 1 if any episode failed, records)."""
        from grading.grader import episode_seed

        o = self.options
        diag(
            f"model={self.model_name} endpoint={self.policy.config.base_url} track={o.track} "
            f"{'server=' + o.server if o.server else 'in-process'}{' via MCP tools' if o.mcp else ''} "
            f"timeout={o.timeout_s:g}s retries={o.max_retries}"
        )
        records = []
        for scenario in o.scenarios:
            for i in range(o.episodes):
                records.append(self.episode(scenario, episode_seed(o.seed, scenario, i)))
        traffic = self.policy.traffic
        diag(
            f"endpoint: {traffic['calls']} requests, {traffic['retries']} retries, "
            f"{traffic['server_errors']} 5xx, {traffic['rate_limited']} 429, {traffic['timeouts']} timeouts, "
            f"{traffic['failures']} failed after retries; {self.policy.stats.not_asked} decisions with only "
            "one legal action were not asked"
        )
        failed = sum(r.failure is not None for r in records)
        return (EXIT_FAILED if failed else EXIT_OK), records

    # ------------------------------------------------------- one episode
    def episode(self, scenario: str, seed: int) -> EpisodeRecord:
        o = self.options
        record = EpisodeRecord(scenario, seed)
        env_id = TEAM_ENV_ID if o.track == "team" else FLAT_ENV_ID
        self.protocol.emit(start_line(scenario, env_id, self.model_name))
        self.policy.reset(seed=seed)
        started = time.perf_counter()
        try:
            if o.mcp:
                self._play_mcp(record)
            else:
                self._play(record)
            record.heuristic_score = self._heuristic(scenario, seed)
            record.success = record.score is not None and record.score >= record.heuristic_score
        except EpisodeFailure as exc:
            record.failure = str(exc)
        except Exception as exc:
            record.failure = f"{type(exc).__name__}: {exc}"
        score = (record.score or 0.0) / 100.0 if record.failure is None else 0.0
        self.protocol.emit(end_line(record.success, record.steps, score, record.rewards))
        self._summary(record, time.perf_counter() - started)
        self.policy.write_summary(
            scenario=scenario, seed=seed, steps=record.steps, failure=record.failure,
            score=record.score, success=record.success,
        )  # fmt: skip
        return record

    def _driver(self, scenario: str) -> Any:
        o = self.options
        if o.server:
            return _Remote(o.server, scenario, o.track)
        return _InProcessTeam(scenario) if o.track == "team" else _InProcessFlat(scenario)

    def _play(self, record: EpisodeRecord) -> None:
        from policies.llm import LLMUnavailableError

        driver = None
        try:
            driver = self._driver(record.scenario)
            driver.reset(record.seed)
            done = False
            while not done:
                actions, errors = self._decide(driver, record)
                reward, done = driver.play(actions)
                if self.options.track == "flat":
                    action, error = str(actions[None]), errors[None]
                else:
                    action = ",".join(str(actions[r]) for r in ROLES)
                    error = ";".join(f"{r}:{errors[r]}" for r in ROLES if errors[r]) or None
                self._step(record, action, reward, done, error)
            record.score = driver.score()
        except LLMUnavailableError as exc:
            raise EpisodeFailure(f"the model endpoint failed: {exc}") from exc
        except (RuntimeError, ConnectionError, OSError, TimeoutError) as exc:
            raise EpisodeFailure(f"the environment failed: {type(exc).__name__}: {exc}") from exc
        finally:
            if isinstance(driver, _Remote):
                driver.close()

    def _decide(
        self, driver: Any, record: EpisodeRecord
    ) -> tuple[dict[str | None, int], dict[str | None, str | None]]:
        from policies.llm import request_tokens

        roles: tuple[str | None, ...] = (None,) if self.options.track == "flat" else ROLES
        actions: dict[str | None, int] = {}
        errors: dict[str | None, str | None] = {}
        tokens = 0
        for role in roles:
            blocks, mask = driver.observe(role)
            decision = self.policy.agents[role].decide(blocks, mask, driver.episode_length)
            self.policy.record(decision, tick=record.steps)
            actions[role], errors[role] = decision.action, decision.error
            tokens += request_tokens(role, decision.prompt)
            if getattr(driver, "sequential", False):
                driver.act_role(role, decision.action)
        record.prompt_tokens.append(tokens)
        return actions, errors

    def _step(self, record: EpisodeRecord, action: str, reward: float, done: bool, error: str | None) -> None:
        record.steps += 1
        record.rewards.append(reward)
        record.actions.append(action)
        record.errors.append(error)
        self.protocol.emit(step_line(record.steps, action, reward, done, error))

    # ----------------------------------------------------------- MCP mode
    def _play_mcp(self, record: EpisodeRecord) -> None:
        import asyncio

        from policies.llm import LLMUnavailableError

        try:
            asyncio.run(self._mcp_episode(record))
        except LLMUnavailableError as exc:
            raise EpisodeFailure(f"the model endpoint failed: {exc}") from exc
        except (RuntimeError, ConnectionError, OSError, TimeoutError) as exc:
            raise EpisodeFailure(f"the MCP server failed: {type(exc).__name__}: {exc}") from exc

    async def _mcp_episode(self, record: EpisodeRecord) -> None:
        from openenv.core.mcp_client import MCPToolClient

        from policies.llm import Decision, parse_action
        from server.mcp_tools import ACTING_TOOLS, READING_TOOLS

        assert self.options.server is not None
        client = MCPToolClient(base_url=self.options.server, message_timeout_s=self.options.timeout_s + 30)
        client.use_production_mode = True  # JSON-RPC at HTTP /mcp, one persistent MCP session
        try:
            tools = await client.list_tools()
            offered = [t for t in tools if t.name in (*ACTING_TOOLS, *READING_TOOLS)]
            if not offered:
                raise RuntimeError(f"{self.options.server}/mcp lists no hospital tools")
            functions = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in offered
            ]
            board = await client.call_tool("start_shift", scenario=record.scenario, seed=record.seed)
            agent = self.policy.agents[None]
            system = agent.system.replace(
                "Reply with one action number only.",
                "Act by calling exactly one tool: admit, ventilate, transfer, discharge, early_discharge, "
                "wait, or act with a legal action number.",
            )
            while not board["done"]:
                if len(board["legal_actions"]) == 1:  # only the no-op: nothing to ask
                    result = await client.call_tool("wait")
                    self.policy.record(
                        Decision(None, "", "", NOOP, None, 0.0, asked=False), tick=record.steps
                    )
                    record.prompt_tokens.append(0)
                    self._step(
                        record,
                        str(result["action"]),
                        float(result["reward"] or 0.0),
                        bool(result["done"]),
                        None,
                    )
                    board = result
                    continue
                messages: list[dict[str, Any]] = [
                    {"role": "system", "content": system},
                    {"role": "user", "content": board["text"]},
                ]
                started = time.perf_counter()
                result, error, reply = await self._mcp_turn(
                    client, agent.model, messages, functions, board, parse_action
                )
                self.policy.record(
                    Decision(
                        None,
                        board["text"],
                        reply,
                        int(result["action"]),
                        error,
                        time.perf_counter() - started,
                        system,
                    ),
                    tick=record.steps,
                )
                record.prompt_tokens.append(estimate_tokens(system + "\n" + board["text"]))
                self._step(
                    record, str(result["action"]), float(result["reward"] or 0.0), bool(result["done"]), error
                )
                board = result
            record.score = float(board["score"])
        finally:
            await client.close()

    async def _mcp_turn(
        self,
        client: Any,
        model: Any,
        messages: list[dict[str, Any]],
        functions: list[dict[str, Any]],
        board: Mapping[str, Any],
        parse_action: Callable[..., tuple[int | None, str | None]],
    ) -> tuple[dict[str, Any], str | None, str]:
        """One tick: up to two reading tool calls, then one acting call (or the no-op with an error)."""
        from server.mcp_tools import ACTING_TOOLS, READING_TOOLS

        for _ in range(3):
            message = model.chat(messages, tools=functions)
            calls = getattr(message, "tool_calls", None) or []
            if not calls:
                text = (getattr(message, "content", None) or "") if message is not None else ""
                number, error = parse_action(text, set(board["legal_actions"]))
                if number is None:
                    return await client.call_tool("wait"), error, text
                return await client.call_tool("act", action=number), None, text
            call = calls[0]
            name, raw = call.function.name, call.function.arguments or "{}"
            reply = f"{name}({raw})"
            try:
                arguments = json.loads(raw)
                if not isinstance(arguments, dict):
                    raise ValueError
            except ValueError:
                return await client.call_tool("wait"), "bad_arguments", reply
            if name in READING_TOOLS:
                seen = await client.call_tool(name)
                messages.append({"role": "assistant", "content": None, "tool_calls": [call.model_dump()]})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(seen)})
                continue
            if name not in ACTING_TOOLS:
                return await client.call_tool("wait"), f"unknown_tool_{name}", reply
            try:
                return await client.call_tool(name, **arguments), None, reply
            except RuntimeError:  # refused: illegal now, or arguments outside the schema
                refused = f"illegal_action_{arguments.get('action')}" if name == "act" else f"refused_{name}"
                return await client.call_tool("wait"), refused, reply
        return await client.call_tool("wait"), "no_action_tool", "(reading tools only)"

    # ----------------------------------------------------------- summary
    def _heuristic(self, scenario: str, seed: int) -> float:
        """The heuristic's score (0-100) on the same day, through the grader's runner of the track."""
        key = (self.options.track, scenario, seed)
        if key not in self._baselines:
            from grading.grader import RUNNERS
            from hospital_marl.core.scenarios import get_scenario
            from policies import HeuristicPolicy, TeamHeuristicPolicy

            policy = TeamHeuristicPolicy() if self.options.track == "team" else HeuristicPolicy()
            self._baselines[key] = RUNNERS[self.options.track](policy, get_scenario(scenario), seed).score
        return self._baselines[key]

    def _summary(self, record: EpisodeRecord, elapsed: float) -> None:
        # the --seed given first, then the day it derives (what a rerun with --seed reproduces)
        where = f"{record.scenario} --seed {self.options.seed} (day seed {record.seed})"
        if record.failure is not None:
            diag(f"{where}: FAILED after {record.steps} steps: {record.failure}")
            return
        tokens = record.prompt_tokens or [0]
        diag(
            f"{where}: score {record.score:.1f} vs heuristic "
            f"{record.heuristic_score:.1f}; {record.invalid_replies} unusable replies in {record.steps} "
            "steps; "
            f"prompt tokens per step (chars/4) mean {sum(tokens) / len(tokens):.0f}, max {max(tokens)}; "
            f"{elapsed:.1f} s"
        )


# ------------------------------------------------------------------ CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenarios", nargs="+", metavar="S", default=["all"],
        help=f"scenarios to play (default all: {' '.join(BUILTIN_SCENARIOS)})",
    )  # fmt: skip
    parser.add_argument(
        "--env", choices=("ed", "radiotherapy"), default="ed",
        help="ed: the emergency department (default); radiotherapy: RT planning, in-process",
    )  # fmt: skip
    parser.add_argument(
        "--tasks", nargs="+", metavar="T", default=["all"],
        help="with --env radiotherapy: tasks to plan (default all: every built-in task)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="base seed: the grader's days (default 0)")
    parser.add_argument("--episodes", type=int, default=1, help="episodes per scenario (default 1)")
    parser.add_argument(
        "--track", choices=("flat", "team"), default="flat", help="flat: one agent; team: one per role"
    )
    parser.add_argument(
        "--server", metavar="URL", help="play against a running server (WebSocket) instead of in-process"
    )
    parser.add_argument(
        "--mcp", action="store_true", help="play through the server's MCP tools with tool calls"
    )
    parser.add_argument("--model", help="model name (default $MODEL_NAME, else the hackathon's default)")
    parser.add_argument(
        "--base-url", help="OpenAI-compatible endpoint (default $API_BASE_URL, else Hugging Face's router)"
    )
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=64, help="reply length cap (default 64)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    parser.add_argument(
        "--retries", type=int, default=2, help="retries per request on errors/timeouts (default 2)"
    )
    parser.add_argument(
        "--transcript", metavar="FILE", help="append every prompt and raw reply to this JSONL file"
    )
    parser.add_argument(
        "--role-model", action="append", default=[], metavar="ROLE=MODEL",
        help="team track: this role's own model on the same endpoint (repeatable)",
    )  # fmt: skip


def options_from_args(args: argparse.Namespace) -> AgentOptions:
    scenarios = BUILTIN_SCENARIOS if args.scenarios == ["all"] else tuple(args.scenarios)
    return AgentOptions(
        scenarios=tuple(scenarios),
        seed=args.seed,
        episodes=args.episodes,
        track=args.track,
        server=args.server,
        mcp=args.mcp,
        model=args.model,
        base_url=args.base_url,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        timeout_s=args.timeout,
        max_retries=args.retries,
        transcript=args.transcript,
        role_models=tuple(tuple(item.partition("=")[::2]) for item in args.role_model),
    )


def run_radiotherapy(args: argparse.Namespace) -> int:
    """``--env radiotherapy``: one LLM plans each task's patients (the RT grader's episode seeds),
    through the same client, request timeout and bounded retries as the ED agent."""
    from grading.common import episode_seed
    from hospital_marl.radiotherapy import task_env_id
    from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, TASKS
    from policies.llm import ChatModel, LLMConfig
    from policies.radiotherapy.llm import LLMRTPolicy, chat_complete, play

    tasks = list(BUILTIN_TASKS) if args.tasks == ["all"] else list(args.tasks)
    try:
        if args.server or args.mcp or args.track != "flat":
            raise ValueError("--env radiotherapy plays in-process with one agent (no --server/--mcp/team)")
        unknown = [name for name in tasks if name not in TASKS]
        if unknown:
            raise ValueError(f"unknown task {unknown[0]!r}; valid names: {', '.join(TASKS)}")
        config = LLMConfig.from_env(
            model=args.model, base_url=args.base_url, temperature=args.temperature,
            max_tokens=args.max_tokens, timeout_s=args.timeout, max_retries=args.retries,
        )  # fmt: skip
        chat = ChatModel(config)
    except (ValueError, ImportError) as exc:
        return refuse_all(tasks, task_env_id, _model_named(args), str(exc))
    policy = LLMRTPolicy(chat_complete(chat), name=config.model)
    failed = 0
    for task in tasks:  # one task failing does not end the others
        for i in range(args.episodes):
            failed += play(policy, task, episode_seed(args.seed, task, i), config.model) is None
    return EXIT_FAILED if failed else EXIT_OK


def refuse_all(tasks: Sequence[str], env_id: Callable[[str], str], model: str, reason: str) -> int:
    """Bad settings: every task asked for still gets its ``[START]`` and ``[END] success=false``
    lines (a harness counting ``[END]`` lines sees each task fail), and the reason goes to stderr."""
    print(f"llm agent: error: {reason}", file=sys.stderr)
    protocol = Protocol()
    for task in tasks:
        protocol.emit(start_line(task, env_id(task), model))
        protocol.emit(end_line(False, 0, 0.0, []))
    return EXIT_USAGE


def _model_named(args: argparse.Namespace) -> str:
    import os

    from policies.llm import DEFAULT_MODEL

    return args.model or os.environ.get("MODEL_NAME") or DEFAULT_MODEL


def run_from_args(args: argparse.Namespace) -> int:
    if args.env == "radiotherapy":
        return run_radiotherapy(args)
    scenarios = list(BUILTIN_SCENARIOS) if args.scenarios == ["all"] else list(args.scenarios)
    env_id = TEAM_ENV_ID if args.track == "team" else FLAT_ENV_ID
    try:
        runner = LLMAgentRunner(options_from_args(args))
    except (ValueError, ImportError) as exc:
        return refuse_all(scenarios, lambda _: env_id, _model_named(args), str(exc))
    status, _ = runner.run()
    return status


def build_parser(prog: str = "inference.py") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Play the emergency department with an LLM behind an OpenAI-compatible API "
        "(API_BASE_URL, MODEL_NAME, API_KEY or HF_TOKEN). stdout: the [START]/[STEP]/[END] lines only.",
    )
    add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python inference.py [options]``."""
    return run_from_args(build_parser().parse_args(argv))


def add_commands(sub: Any) -> None:
    """Add ``llm`` to the ``hospital-marl`` subcommands."""
    p = sub.add_parser(
        "llm",
        help="play shifts with an LLM (OpenAI-compatible API); prints [START]/[STEP]/[END] lines",
        description=build_parser().description,
    )
    add_arguments(p)
    p.set_defaults(func=run_from_args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


__all__ = [
    "AgentOptions",
    "EpisodeRecord",
    "LLMAgentRunner",
    "add_commands",
    "main",
]
