"""The masked-action audit: during training, no action the agent's mask ruled out may be taken.

Two independent counts, both must stay 0:

- ``masked_actions_taken`` (:meth:`MaskedActionAudit.on_sample_end`): every action
  in every sampled episode chunk -- exactly the data the learner trains on,
  unfinished episodes included -- checked against the ``action_mask`` of the
  observation the agent acted on. Also counts ``audited_actions``, so a zero is
  never vacuous.
- ``env_invalid_actions`` (:meth:`MaskedActionAudit.on_episode_end`): the
  simulator's own count of invalid actions (``infos[role]["invalid_actions"]``, a
  per-episode running total), per finished episode. It would catch a mask that
  disagrees with the rules, which the first count cannot.

Both are logged with ``reduce="sum"``: per training iteration, under
``result["env_runners"]``. ``team_return_sum`` / ``finished_episodes`` is the mean
raw team reward of the finished episodes (unscaled, as the grader counts it), for
the learning curve.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.callbacks.callbacks import RLlibCallback

from policies.rllib.module import MASK_KEY

MASKED_ACTIONS_TAKEN = "masked_actions_taken"
AUDITED_ACTIONS = "audited_actions"
ENV_INVALID_ACTIONS = "env_invalid_actions"
TEAM_RETURN_SUM = "team_return_sum"
FINISHED_EPISODES = "finished_episodes"


def count_masked_actions(single_agent_episode: Any) -> tuple[int, int]:
    """(actions taken that their observation's mask ruled out, actions checked) in one agent's chunk.

    Works on list-based and numpy-ized episodes: observation ``t`` is the one
    action ``t`` was chosen on.
    """
    n = len(single_agent_episode)
    if n == 0:
        return 0, 0
    observations = single_agent_episode.get_observations(slice(0, n))
    actions = np.asarray(single_agent_episode.get_actions(slice(0, n)), dtype=np.int64).reshape(n)
    if isinstance(observations, dict):  # numpy-ized: one dict of stacked arrays
        masks = np.asarray(observations[MASK_KEY])
    else:  # a list of per-step dicts
        masks = np.stack([np.asarray(o[MASK_KEY]) for o in observations])
    masks = masks.reshape(n, -1)
    in_range = (actions >= 0) & (actions < masks.shape[1])
    allowed = np.zeros(n, dtype=bool)
    allowed[in_range] = masks[np.flatnonzero(in_range), actions[in_range]] > 0
    return int(np.count_nonzero(~allowed)), n


class MaskedActionAudit(RLlibCallback):
    """Counts masked-out actions taken during training (see the module docstring)."""

    def on_sample_end(self, *, env_runner: Any = None, metrics_logger: Any = None, samples: Any, **kw: Any):
        masked, audited = 0, 0
        for episode in samples:
            agent_episodes = getattr(episode, "agent_episodes", None)
            for sa_episode in agent_episodes.values() if agent_episodes is not None else [episode]:
                m, a = count_masked_actions(sa_episode)
                masked += m
                audited += a
        if metrics_logger is not None:
            metrics_logger.log_value(MASKED_ACTIONS_TAKEN, masked, reduce="sum")
            metrics_logger.log_value(AUDITED_ACTIONS, audited, reduce="sum")

    def on_episode_end(self, *, episode: Any, metrics_logger: Any = None, **kw: Any) -> None:
        invalid, team_return = 0, None
        for sa_episode in episode.agent_episodes.values():
            info = sa_episode.get_infos(-1) or {}
            invalid = max(invalid, int(info.get("invalid_actions", 0)))
            counters = info.get("counters")
            if counters is not None:
                team_return = float(counters["cumulative_reward"])
        if metrics_logger is not None:
            metrics_logger.log_value(ENV_INVALID_ACTIONS, invalid, reduce="sum")
            metrics_logger.log_value(FINISHED_EPISODES, 1, reduce="sum")
            if team_return is not None:
                metrics_logger.log_value(TEAM_RETURN_SUM, team_return, reduce="sum")
