"""The SB3 adapter (MaskablePPO on the batched env), the threaded batch loop, and
conservation (SPEC §2) over long batched runs."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.core.hospital import AWAY, DEAD, DISCHARGED, GENERAL, ICU, NOT_ARRIVED, WAITING
from hospital_marl.core.types import (
    C_ARRIVALS,
    C_BOUNCE_BACKS,
    C_DEATHS,
    C_DISCHARGES,
    C_EARLY_DISCHARGES,
    PAT_LOCATION,
    S_N_PATIENTS,
    S_NEXT_ARRIVAL,
)
from hospital_marl.envs.vector import HospitalEDTeamVectorEnv, HospitalEDVectorEnv


def test_maskable_ppo__learns_on_the_sb3_adapter_with_batched_masks() -> None:
    pytest.importorskip("sb3_contrib")  # the train extra is part of dev: installed in CI
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import VecMonitor

    from hospital_marl.envs.sb3 import HospitalSB3VecEnv

    env = HospitalSB3VecEnv(4, "surge", seed=0, max_cycles=20)
    assert env.env_method("action_masks").shape == (4, 39)
    model = MaskablePPO("MultiInputPolicy", VecMonitor(env), n_steps=16, batch_size=32, n_epochs=1, seed=0)
    model.learn(128)
    assert model.num_timesteps >= 128
    obs = env.reset()
    masks = env.action_masks()
    actions, _ = model.predict(obs, action_masks=masks, deterministic=True)
    assert masks[np.arange(4), actions].all(), "masked predictions are valid actions"
    for _ in range(25):  # max_cycles=20: every env finishes once
        obs, _rewards, dones, infos = env.step(np.zeros(4, np.int64))
        if dones.any():
            i = int(np.flatnonzero(dones)[0])
            assert set(infos[i]["terminal_observation"]) == set(obs)
            assert infos[i]["TimeLimit.truncated"] and 0 <= infos[i]["score"] <= 100
            return
    pytest.fail("no episode ended")


@pytest.mark.parametrize("threads", [2, 3])
def test_threaded_batch_loop__is_bit_identical_to_the_serial_one(threads: int) -> None:
    """Threads split the rows (3 threads over 8 envs: uneven ranges); every env's whole kernel
    state, rewards and autoresets must equal the serial run's (SPEC §10: determinism)."""
    serial, threaded = HospitalEDVectorEnv(8, "surge"), HospitalEDVectorEnv(8, "surge", threads=threads)
    serial.reset(seed=3)
    threaded.reset(seed=3)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(250):
        masks = serial.action_masks()
        np.testing.assert_array_equal(masks, threaded.action_masks())
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        _a, ra, ta, _, ia = serial.step(actions)
        _b, rb, tb, _, ib = threaded.step(actions)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(ta, tb)
        np.testing.assert_array_equal(serial.state_vectors, threaded.state_vectors)
        for mine, theirs in zip(serial._batch.state, threaded._batch.state):
            np.testing.assert_array_equal(mine, theirs)
        if "final_info" in ia:
            ended += 1
            np.testing.assert_array_equal(ia["final_info"]["score"], ib["final_info"]["score"])
    assert ended, "no episode ended: the autoreset path was not compared"
    threaded.close()


def test_threaded_team_batch__is_bit_identical_to_the_serial_one() -> None:
    serial = HospitalEDTeamVectorEnv(5, "ventilator_crisis")
    threaded = HospitalEDTeamVectorEnv(5, "ventilator_crisis", threads=2)
    serial.reset(seed=11)
    threaded.reset(seed=11)
    rng = np.random.default_rng(1)
    for _ in range(120):
        masks = serial.action_masks()
        actions = np.stack([(rng.random(m.shape) * m).reshape(-1) for m in masks])
        joint = np.stack([actions[:, a:b].argmax(axis=1) for a, b in ((0, 21), (21, 37), (37, 41))], 1)
        _a, ra, *_ = serial.step(joint)
        _b, rb, *_ = threaded.step(joint)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(serial.state_vectors, threaded.state_vectors)
    threaded.close()


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_vector_env__refuses_a_bad_thread_count(threads: object) -> None:
    with pytest.raises(ValueError, match="threads"):
        HospitalEDVectorEnv(2, "normal_day", threads=threads)


def test_conservation__holds_in_every_env_of_a_long_batched_run() -> None:
    """arrivals = waiting + general + ICU + discharged + away + died, in every env, every step;
    plus the counters agree with where the patients are."""
    venv = HospitalEDVectorEnv(16, "mass_casualty")
    venv.reset(seed=11)
    rng = np.random.default_rng(1)
    early = 0
    for _ in range(350):  # 3.5 shifts: autoresets included
        masks = venv.action_masks()
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        venv.step(actions)
        st = venv._batch.state
        for e in range(16):
            n = int(st.scalars[e, S_N_PATIENTS])
            where = np.bincount(st.pat[e, :n, PAT_LOCATION], minlength=7)
            arrivals = int(st.scalars[e, C_ARRIVALS])
            assert arrivals == int(st.scalars[e, S_NEXT_ARRIVAL]) == n - where[NOT_ARRIVED]
            assert arrivals == sum(where[[WAITING, GENERAL, ICU, DISCHARGED, AWAY, DEAD]])
            assert where[DEAD] == st.scalars[e, C_DEATHS]
            assert where[DISCHARGED] == st.scalars[e, C_DISCHARGES]
            # every early discharge is either still away or has bounced back
            assert st.scalars[e, C_EARLY_DISCHARGES] == where[AWAY] + st.scalars[e, C_BOUNCE_BACKS]
            early += int(st.scalars[e, C_EARLY_DISCHARGES])
    assert early > 0, "the run must exercise early discharges (and so the away state)"
