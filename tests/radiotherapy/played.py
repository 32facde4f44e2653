"""What an RT agent plays on one graded patient (the residual and option-selector tests share it)."""

from __future__ import annotations

from typing import Any

from grading.radiotherapy import run_episode
from hospital_marl.radiotherapy.core.tasks import get_task


def played_actions(agent: Any, task: str, seed: int, split: str = "validation") -> tuple[list[int], float]:
    """The env actions ``agent`` plays on one patient, through the grader, and the final score."""
    played: list[int] = []
    act = agent.act

    def recording(observation: Any, action_mask: Any) -> int:
        action = act(observation, action_mask)
        played.append(int(action))
        return action

    agent.act = recording
    try:
        episode = run_episode(agent, get_task(task), seed, split)
    finally:
        del agent.act
    return played, episode.score
