"""The fast trainers (training/fast): masks honoured, same seed same run, ONNX plays as torch did,
and the batched feature encoder is the scalar one row for row. Tiny runs (a few seconds each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import policies
from grading import grade
from hospital_marl.core.actions import QUEUE_SLOTS, ROLE_ACTION_COUNTS, ROLE_KIND_INDEX, ROLES, Kind
from hospital_marl.envs.observations import STATE_SIZE, role_slices
from hospital_marl.envs.vector import HospitalEDVectorEnv, HospitalMARLVectorEnv
from policies.fast import load_fast_policy
from policies.learned import FeatureEncoder, OnnxLogits, encode_batch
from policies.marl import encode_role
from training.fast.args import MASK_COLUMNS, ROLE_DIMS, MappoArgs, PpoArgs
from training.fast.common import MASKED_LOGIT, sample

TINY = {"frames": 600, "num_envs": 10, "steps": 30, "minibatch": 100, "eval_episodes": 1, "progress": False}


class Recorder:
    """An evaluation function that grades nothing and remembers what it was asked."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(
        self, policy: Any, *, episodes: int, seed: int, scenarios: Any, track: str
    ) -> dict[str, Any]:
        self.calls.append({"episodes": episodes, "seed": seed, "scenarios": tuple(scenarios), "track": track})
        return {
            "overall_score": float(len(self.calls)),
            "invalid_action_rate": 0.0,
            "scenario_scores": dict.fromkeys(scenarios, 0.0),
            "scenarios": {s: {"score_stderr": 0.0} for s in scenarios},
        }


def mappo_run(tmp: Path, name: str, **kwargs: Any) -> Path:
    from training.fast.mappo import train

    return train(MappoArgs(**{**TINY, "all_scenarios": True, **kwargs}, save=str(tmp / name)), Recorder())


def test_sample__never_draws_a_masked_action() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4096, 21) * 5
    mask = torch.rand(4096, 21, generator=gen) < 0.2
    mask[:, 0] = True  # the no-op is always valid
    action, logp = sample(torch.where(mask, logits, torch.full_like(logits, MASKED_LOGIT)), gen)
    assert mask.gather(1, action.unsqueeze(1)).all()
    assert torch.isfinite(logp).all()


@pytest.mark.parametrize(
    "algorithm,shared,protocol",
    [("mappo", False, "aec"), ("ippo", True, "aec"), ("mappo", False, "simultaneous")],
)
def test_mappo__tiny_run_takes_no_masked_action_and_grades_on_validation_days(
    tmp_path: Path, algorithm: str, shared: bool, protocol: str
) -> None:
    run = mappo_run(
        tmp_path, algorithm, algorithm=algorithm, shared_actor=shared, eval_interval=300, protocol=protocol
    )
    meta = json.loads((run / "fast.json").read_text())
    assert meta["audit"] == {"masked_actions_taken": 0, "audited_actions": meta["frames"] * 3}
    assert meta["frames"] == 600
    curve = json.loads((run / "curve.json").read_text())
    assert [row["timesteps"] for row in curve] == [300, 600]
    assert meta["validation"]["seed"] == 1000
    assert meta["best"]["eval_score"] == 2.0  # the recorder's second (higher) grade was kept


def test_mappo__same_seed_same_run_on_cpu(tmp_path: Path) -> None:
    a = torch.load(mappo_run(tmp_path, "a", seed=3) / "final.pt")["agents"]
    b = torch.load(mappo_run(tmp_path, "b", seed=3) / "final.pt")["agents"]
    c = torch.load(mappo_run(tmp_path, "c", seed=4) / "final.pt")["agents"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_ppo__same_seed_same_weights_on_cpu(tmp_path: Path) -> None:
    from training.fast.ppo import train

    def weights(name: str, seed: int) -> dict[str, torch.Tensor]:
        args = PpoArgs(**TINY, all_scenarios=True, seed=seed, save=str(tmp_path / name))
        return torch.load(train(args, Recorder()) / "final.pt")["net"]

    a, b, c = weights("a", 3), weights("b", 3), weights("c", 4)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


@pytest.mark.parametrize("actor", ["mlp", "entity"])
def test_mappo__onnx_actors_play_the_torch_actors_actions(tmp_path: Path, actor: str) -> None:
    from training.fast.mappo import Agents

    run = mappo_run(tmp_path, "onnx", actor=actor)
    assert json.loads((run / "fast.json").read_text())["audit"]["masked_actions_taken"] == 0
    args = MappoArgs.from_json(json.loads((run / "fast.json").read_text())["args"])
    agents = Agents(args)
    agents.load_state_dict(torch.load(run / "final.pt")["agents"])
    policy = load_fast_policy(run, which="final")
    env = HospitalMARLVectorEnv(8, scenario="surge")
    obs, _ = env.reset(seed=11)
    rng = np.random.default_rng(0)
    for _ in range(40):
        actions = {}
        for role in ROLES:
            raw, mask = obs[role]["observation"], obs[role]["action_mask"].astype(bool)
            with torch.no_grad():
                logits = agents.actors[role](torch.as_tensor(np.stack([encode_role(role, o) for o in raw])))
            best = torch.where(torch.as_tensor(mask), logits, -torch.inf)
            played = torch.as_tensor([policy.act_role(role, raw[i], mask[i]) for i in range(len(raw))])
            assert mask[np.arange(len(raw)), played.numpy()].all()
            # the torch actor's best action, or one tied with it (the entity actor gives two identical
            # patients the same logit, and which of them float rounding favours may differ)
            assert torch.allclose(best.gather(1, played[:, None])[:, 0], best.max(1).values, atol=1e-5)
            actions[role] = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        obs, *_ = env.step(actions)


def test_mappo__a_run_loads_by_path_and_grades_with_no_invalid_action(tmp_path: Path) -> None:
    run = mappo_run(tmp_path, "graded")
    report = grade(policies.load(str(run)), episodes=1, seed=0, scenarios=["normal_day"], track="team")
    assert report["invalid_action_rate"] == 0.0


@pytest.mark.parametrize("track", ["flat", "team"])
def test_ppo__tiny_run_masks_honoured_and_onnx_matches_torch(tmp_path: Path, track: str) -> None:
    from training.fast.ppo import train

    recorder = Recorder()
    run = train(PpoArgs(**TINY, track=track, all_scenarios=True, save=str(tmp_path / track)), recorder)
    meta = json.loads((run / "best_model.json").read_text())
    assert meta["audit"]["masked_actions_taken"] == 0
    assert recorder.calls[-1]["track"] == track
    from training.fast.ppo import ActorCritic

    model = ActorCritic(PpoArgs.from_json(meta["args"]))
    model.load_state_dict(torch.load(run / "final.pt")["net"])
    actor = model.actor.eval()
    probe = np.random.default_rng(1).uniform(0, 3, (64, actor[0].in_features)).astype(np.float32)
    onnx = OnnxLogits(run / "model.onnx")
    with torch.no_grad():
        expected = actor(torch.as_tensor(probe)).numpy()
    got = np.stack([onnx(row) for row in probe])
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert (got.argmax(1) == expected.argmax(1)).all()
    policy = policies.load(str(run))
    assert policy.tracks == (track,)


def test_encode_batch__equals_the_scalar_encoder_row_for_row() -> None:
    encoder = FeatureEncoder()
    rng = np.random.default_rng(0)
    env = HospitalEDVectorEnv(6, scenario="mass_casualty")
    obs, _ = env.reset(seed=2)
    for _ in range(120):
        batch = encode_batch(obs)
        for i in range(6):
            assert np.array_equal(batch[i], encoder({k: v[i] for k, v in obs.items()}))
        obs, *_ = env.step(np.array([rng.choice(np.flatnonzero(m)) for m in env.action_masks()]))


def test_args__refuse_bad_values_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="algorithm"):
        MappoArgs(algorithm="qmix")
    with pytest.raises(ValueError, match="track"):
        PpoArgs(track="both")
    with pytest.raises(ValueError, match="num_envs"):
        MappoArgs(num_envs=3, all_scenarios=True)


def test_shipped_team_runs__load_by_name_and_ship_in_the_wheel() -> None:
    """Every registered team run loads by name (onnxruntime, no torch) and lies under a folder the
    wheel's package-data globs include (an installed wheel could not load it otherwise)."""
    import fnmatch

    import tomllib

    from policies import SHIPPED_TEAM_RUNS

    data = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    globs = data["tool"]["setuptools"]["package-data"]["policies"]
    for name, rel in SHIPPED_TEAM_RUNS.items():
        shipped = f"checkpoints/{rel}/best/triage.onnx"
        assert any(fnmatch.fnmatchcase(shipped, glob) for glob in globs), (rel, globs)
        policy = policies.load(name)
        assert policy.name == name and policy.tracks == ("team",)


def test_mappo__score_reward_pays_each_day_its_graded_score_minus_the_empty_shift() -> None:
    """--reward score: a department's undiscounted return over a day is the day's graded score
    minus an empty shift's (the score the grader reports for that day), for every row at once."""
    from hospital_marl.envs.wrappers import VectorScoreReward
    from training.fast.mappo import Departments

    envs = Departments(MappoArgs(**{**TINY, "all_scenarios": True, "reward": "score"}))
    empty = envs.steppers[0].empty_shift_score
    assert isinstance(envs.steppers[0], VectorScoreReward)
    returns = np.zeros(TINY["num_envs"])
    finished = np.zeros(TINY["num_envs"], bool)
    order: list[int] = []
    rng = np.random.default_rng(0)
    while not finished.all():
        sizes = [ROLE_ACTION_COUNTS[role] for role in ROLES]
        masks = np.split(envs.masks, np.cumsum(sizes)[:-1], axis=1)  # (B, 21 + 16 + 4)
        actions = np.stack([[rng.choice(np.flatnonzero(m[i])) for i in range(len(m))] for m in masks], 1)
        reward, done = envs.step(actions)
        returns += np.where(finished, 0.0, reward)
        order += [i for i in np.flatnonzero(done & ~finished)]
        finished |= done
    # scores are appended in row order of the step that ended each day, as `order` was
    assert envs.scores[: len(order)] == pytest.approx((returns[order] + empty).tolist(), abs=1e-6)


def test_mappo_args__score_reward_refuses_reward_overrides() -> None:
    with pytest.raises(ValueError, match="reward_overrides"):
        MappoArgs(reward="score", reward_overrides="death=-20")
    with pytest.raises(ValueError, match="reward"):
        MappoArgs(reward="points")


# ------------------------------------------------------------------ ablation options (issue 26)
def test_running_mean_std__equals_numpy_over_every_batch_fed() -> None:
    """Chan et al.'s parallel update from an empty start: after batches of any sizes the statistics
    are numpy's population mean and variance of all rows, and the layer applies
    clip((x - mean) / sqrt(var + 1e-8), -10, 10)."""
    from training.fast.common import RunningMeanStd

    rng = np.random.default_rng(0)
    rms = RunningMeanStd((5,))
    chunks = [
        rng.normal(3.0, 2.0, (n, 5)) * [1, 10, 0.1, 1, 1] + [0, 0, 0, 100, 0] for n in (1, 7, 300, 2, 50)
    ]
    for chunk in chunks:
        rms.update(torch.as_tensor(chunk))
    data = np.concatenate(chunks)
    np.testing.assert_allclose(rms.mean.numpy(), data.mean(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rms.var.numpy(), data.var(0), rtol=1e-12)
    assert float(rms.count) == len(data)
    probe = rng.normal(0, 50, (20, 5))
    expected = np.clip((probe - data.mean(0)) / np.sqrt(data.var(0) + 1e-8), -10, 10)
    np.testing.assert_allclose(rms(torch.as_tensor(probe)).numpy(), expected, rtol=1e-10)


def test_return_normaliser__divides_each_reward_by_the_running_std_of_discounted_returns() -> None:
    """SB3 VecNormalize's reward scaling: ret = gamma * ret + r per env (zeroed after a done), the
    running variance over every ret so far, r / sqrt(var + 1e-8) clipped to +-10, no mean removed."""
    from training.fast.common import ReturnNormaliser

    rng = np.random.default_rng(1)
    gamma, n = 0.9, 4
    norm = ReturnNormaliser(n, gamma)
    ret, seen = np.zeros(n), []
    for t in range(40):
        reward = rng.normal(-1.0, 3.0, n)
        done = rng.random(n) < 0.1
        ret = gamma * ret + reward
        seen.append(ret.copy())
        expected = np.clip(reward / np.sqrt(np.var(np.concatenate(seen)) + 1e-8), -10, 10)
        np.testing.assert_allclose(norm(reward, done), expected, rtol=1e-10, err_msg=f"tick {t}")
        ret[done] = 0.0


def test_mappo__obs_norm_onnx_actors_equal_the_torch_actors_on_raw_input(tmp_path: Path) -> None:
    """--obs-norm: every observation read to act is counted once in the statistics, and the
    exported ONNX actor (raw encoded role observation in) gives the torch actor's logits on the
    normalised input: the statistics are frozen into the file."""
    from training.fast.mappo import Agents

    run = mappo_run(tmp_path, "obs_norm", obs_norm=True)
    meta = json.loads((run / "fast.json").read_text())
    agents = Agents(MappoArgs.from_json(meta["args"]))
    agents.load_state_dict(torch.load(run / "final.pt")["agents"])
    stats = agents.obs_rms
    # on the AEC protocol (the default) each role reads its own state: three per frame
    assert meta["protocol"] == "aec"
    assert stats is not None and float(stats.count) == meta["frames"] * len(ROLES)
    env = HospitalMARLVectorEnv(16, scenario="mass_casualty")
    obs, _ = env.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(30):
        obs, *_ = env.step(
            {r: np.array([rng.choice(np.flatnonzero(m)) for m in obs[r]["action_mask"]]) for r in ROLES}
        )
    for role in ROLES:
        raw = np.stack([encode_role(role, o) for o in obs[role]["observation"]]).astype(np.float32)
        index = agents.index[role].numpy()
        mean, var = stats.mean.numpy()[index], stats.var.numpy()[index]
        normalised = np.clip((raw - mean) / np.sqrt(var + 1e-8), -10, 10).astype(np.float32)
        with torch.no_grad():
            expected = agents.actors[role](torch.as_tensor(normalised)).numpy()
            unnormalised = agents.actors[role](torch.as_tensor(raw)).numpy()
        onnx = OnnxLogits(run / meta["actors"]["final"][role])
        got = np.stack([onnx(row) for row in raw])
        np.testing.assert_allclose(got, expected, atol=1e-4)
        assert not np.allclose(got, unnormalised, atol=1e-3)  # the statistics are in the file


def _recurrent_rollouts(rollouts: int) -> tuple[Any, Any, Any]:
    """Agents, departments and a rollout buffer of a tiny recurrent run after ``rollouts`` rollouts."""
    from training.fast.mappo import Agents, Departments, Rollout

    args = MappoArgs(**{**TINY, "steps": 60, "all_scenarios": True, "recurrent": True, "obs_norm": True})
    torch.manual_seed(0)
    agents, envs = Agents(args), Departments(args)
    buf, gen = Rollout(args, agents, torch.device("cpu")), torch.Generator().manual_seed(0)
    for _ in range(rollouts):
        buf.collect(agents, envs, gen)
    return agents, buf, args


def test_recurrent__the_update_recomputes_the_rollout_logits_from_whole_sequences() -> None:
    """The second rollout starts from carried (non-zero) hidden states and crosses day ends; every
    minibatch of whole department sequences, recomputed from the stored initial states, gives the
    log-probabilities and values the rollout acted with (same parameters, before any step)."""
    agents, buf, args = _recurrent_rollouts(2)
    assert all(h.abs().sum() > 0 for h in buf.hidden0.values())
    assert buf.starts[1:].any()
    for idx in torch.randperm(args.num_envs, generator=torch.Generator().manual_seed(1)).split(3):
        hidden0 = {core: h[idx] for core, h in buf.hidden0.items()}
        with torch.no_grad():
            logits, values, _ = agents.sequence(
                buf.states[:, idx], buf.masks[:, idx], hidden0, buf.starts[:, idx]
            )
        for r, role in enumerate(ROLES):
            logp = torch.log_softmax(logits[role], -1).gather(-1, buf.actions[:, idx, r : r + 1]).squeeze(-1)
            torch.testing.assert_close(logp, buf.logps[:, idx, r], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(values, buf.values[:, idx], atol=1e-5, rtol=1e-5)


def test_recurrent__hidden_state_is_zeroed_at_a_day_start() -> None:
    """Where a department starts a new day mid-rollout its logits are those of a fresh (zero) hidden
    state on that observation; without the reset the carried state would change them."""
    agents, buf, _ = _recurrent_rollouts(2)
    ts, rows = torch.nonzero(buf.starts[1:], as_tuple=True)
    t, i = int(ts[0]) + 1, int(rows[0])
    seq = (
        buf.states[:, i : i + 1],
        buf.masks[:, i : i + 1],
        {c: h[i : i + 1] for c, h in buf.hidden0.items()},
    )
    no_reset = buf.starts[:, i : i + 1].clone()
    no_reset[t] = 0.0
    with torch.no_grad():
        carried, _, _ = agents.sequence(*seq, buf.starts[:, i : i + 1])
        zero = agents.initial_hidden(1, torch.device("cpu"))
        fresh, _, _ = agents.sequence(
            buf.states[t : t + 1, i : i + 1], buf.masks[t : t + 1, i : i + 1], zero, torch.zeros((1, 1))
        )
        unreset, _, _ = agents.sequence(*seq, no_reset)
    for role in ROLES:
        torch.testing.assert_close(carried[role][t], fresh[role][0], atol=1e-6, rtol=1e-6)
    assert any(not torch.allclose(unreset[role][t], fresh[role][0], atol=1e-4) for role in ROLES)


def test_recurrent__run_exports_onnx_actors_that_play_as_the_torch_ones(tmp_path: Path) -> None:
    """A --recurrent run exports each role's actor as ONNX (one decision, hidden state in and out);
    policies.load plays them without torch, exactly as the torch actors of best.pt play (every graded
    decision the same, so the same days and scores), valid actions only; reset() zeroes every state."""
    from policies.fast import RecurrentTeamPolicy
    from training.fast.mappo import Agents, team_policy

    run = mappo_run(tmp_path, "gru", recurrent=True, obs_norm=True)
    meta = json.loads((run / "fast.json").read_text())
    assert meta["recurrent"] and meta["hidden_size"] > 0 and set(meta["actors"]) == {"best", "final"}
    agents = Agents(MappoArgs.from_json(meta["args"]))
    agents.load_state_dict(torch.load(run / meta["checkpoints"]["best"])["agents"])
    with_torch = team_policy(agents, "gru")
    loaded = policies.load(str(run))
    assert isinstance(with_torch, RecurrentTeamPolicy) and isinstance(loaded, RecurrentTeamPolicy)

    decisions: dict[str, list[tuple[str, int]]] = {"torch": [], "onnx": []}
    for key, policy in (("torch", with_torch), ("onnx", loaded)):
        act = policy.act_role

        def recorded(role: str, observation: Any, mask: Any, act: Any = act, key: str = key) -> int:
            action = act(role, observation, mask)
            decisions[key].append((role, action))
            return action

        policy.act_role = recorded  # type: ignore[method-assign]
    days = {"episodes": 1, "seed": 0, "scenarios": ["surge"], "track": "team"}
    reports = [grade(with_torch, **days), grade(loaded, **days)]
    assert decisions["torch"] == decisions["onnx"] and len(decisions["onnx"]) > 100
    assert (
        reports[0]["scenarios"]["surge"]["episode_scores"]
        == reports[1]["scenarios"]["surge"]["episode_scores"]
    )
    assert reports[1]["invalid_action_rate"] == 0.0
    assert any(np.abs(h).sum() > 0 for h in loaded.hidden.values())
    loaded.reset(seed=0)
    assert all(np.abs(h).sum() == 0 for h in loaded.hidden.values())


def test_recurrent__a_run_without_onnx_actors_says_where_they_are(tmp_path: Path) -> None:
    run = tmp_path / "old"
    run.mkdir()
    meta = {"format": "hospital_marl.fast/1", "name": "gru", "actors": {}, "export": "torch: ..."}
    (run / "fast.json").write_text(json.dumps(meta))
    with pytest.raises(FileNotFoundError, match=r"best\.pt"):
        load_fast_policy(run)


def test_mappo_args__recurrent_refuses_the_shared_actor() -> None:
    with pytest.raises(ValueError, match="shared_actor"):
        MappoArgs(recurrent=True, shared_actor=True)


def _role_action(role: str, kind: Kind, index: int) -> int:
    """A role action by its meaning, read off the action table."""
    return ROLE_KIND_INDEX[role].index((kind, index))


def _queue_columns(role: str) -> np.ndarray:
    """``(10, 3)``: the role vector's columns of each waiting-queue slot."""
    where = dict(role_slices()[role])["waiting_queue"]
    return np.arange(where.start, where.stop).reshape(QUEUE_SLOTS, 3)


def _entity_probe(role: str, rows: int = 32) -> torch.Tensor:
    """Encoded role observations with some entity rows empty (severity 0), as the env gives them."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0.0, 1.0, (rows, ROLE_DIMS[role])).astype(np.float32)
    x[rng.uniform(size=x.shape) < 0.3] = 0.0
    return torch.as_tensor(x)


def test_entity_actor__admission_logits_follow_their_queue_slot_when_slots_are_permuted() -> None:
    from training.fast.entity import EntityActor

    torch.manual_seed(0)
    actor = EntityActor("triage").eval()
    for layer in actor.heads.values():  # the 0.01 output gain makes logits ~0: spread them out
        torch.nn.init.normal_(layer[0].weight)
    x = _entity_probe("triage")
    columns = _queue_columns("triage")
    perm = np.random.default_rng(1).permutation(QUEUE_SLOTS)
    shuffled = x.clone()
    shuffled[:, columns.ravel()] = x[:, columns[perm].ravel()]  # new slot j holds old slot perm[j]
    with torch.no_grad():
        before, after = actor(x), actor(shuffled)
    assert before.std() > 0.1
    assert torch.allclose(after[:, 0], before[:, 0], atol=1e-5)  # the no-op sees the same set
    for kind in (Kind.ADMIT_GENERAL, Kind.ADMIT_ICU):
        for j in range(QUEUE_SLOTS):
            new, old = _role_action("triage", kind, j), _role_action("triage", kind, int(perm[j]))
            assert torch.allclose(after[:, new], before[:, old], atol=1e-5)


def test_entity_actor__bed_manager_reads_the_queue_as_a_set() -> None:
    from training.fast.entity import EntityActor

    torch.manual_seed(0)
    actor = EntityActor("bed_manager").eval()
    x = _entity_probe("bed_manager")
    columns = _queue_columns("bed_manager")
    shuffled = x.clone()
    shuffled[:, columns.ravel()] = x[:, columns[::-1].ravel()]
    with torch.no_grad():
        assert torch.allclose(actor(shuffled), actor(x), atol=1e-5)
        changed = x.clone()
        changed[:, columns[0, 0]] += 1.0  # a different patient in the queue: a different decision
        assert not torch.allclose(actor(changed), actor(x))


def test_entity_actor__masked_actions_get_the_masked_logit_and_are_never_drawn() -> None:
    from training.fast.mappo import Agents

    agents = Agents(MappoArgs(actor="entity", all_scenarios=True))
    state = torch.rand(4096, 3, STATE_SIZE) * 2
    gen = torch.Generator().manual_seed(0)
    mask = torch.rand(4096, sum(ROLE_ACTION_COUNTS.values()), generator=gen) < 0.3
    for role in ROLES:
        mask[:, MASK_COLUMNS[role].start] = True  # every role's no-op is always valid
    with torch.no_grad():
        logits = agents.logits(agents.turn_views(state), mask)
    for role in ROLES:
        role_mask = mask[:, MASK_COLUMNS[role]]
        assert (logits[role][~role_mask] == MASKED_LOGIT).all()
        assert (logits[role][role_mask] > MASKED_LOGIT / 2).all()
        action, _ = sample(logits[role], gen)
        assert role_mask.gather(1, action.unsqueeze(1)).all()


def test_mappo_args__entity_actor_refuses_shared_and_recurrent() -> None:
    with pytest.raises(ValueError, match="shared_actor"):
        MappoArgs(actor="entity", shared_actor=True)
    with pytest.raises(ValueError, match="recurrent"):
        MappoArgs(actor="entity", recurrent=True)
    with pytest.raises(ValueError, match="actor"):
        MappoArgs(actor="attention")
