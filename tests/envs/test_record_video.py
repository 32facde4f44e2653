"""Gymnasium's ``RecordVideo`` on the composed env, as its docs have a user type it (issue #44,
item 6): it needs moviepy, which the ``video`` extra (and ``[dev]``) installs."""

from __future__ import annotations

import gymnasium as gym
from gymnasium.wrappers import RecordVideo

from hospital_marl import COMPOSED_ENV_ID


def test_record_video__writes_an_episode_mp4(tmp_path) -> None:
    env = gym.make(COMPOSED_ENV_ID, render_mode="rgb_array", max_cycles=8)
    env = RecordVideo(env, video_folder=str(tmp_path), episode_trigger=lambda episode: True)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(0)
        done = terminated or truncated
    env.close()
    videos = list(tmp_path.glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 1000
