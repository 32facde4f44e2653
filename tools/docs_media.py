"""Render the docs site's pictures: one animated GIF per environment card, and the labelled board.

    python tools/docs_media.py            # write docs/images/*.gif, board.png and rt-plan.png
    python tools/docs_media.py --check    # exit 1 if a picture an environment card shows is missing

Every GIF is drawn by the env's own ``rgb_array`` renderer (the ED's compact board, the
radiotherapy plan view) while a shipped policy plays a fixed seed, so it shows real behaviour and
is reproducible. Frames are subsampled and, for the ED, halved in size: a card's GIF stays well
under 200 kB. ``board.png`` is :func:`hospital_marl.envs.labelled.render_labelled` mid-shift;
``rt-plan.png`` the radiotherapy frame of the ``rt-head-neck`` GIF's last state (the README's picture).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an installed copy

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"


def _ed_policy(name: str, seed: int, hospital):
    import policies

    policy = policies.load(name)
    policy.reset(seed=seed, hospital=hospital)
    return policy


def aec_frames(seed: int = 0) -> Iterator[np.ndarray]:
    """The AEC env on ``surge``, each role played by the team heuristic; one frame per tick."""
    import hospital_marl

    env = hospital_marl.env(scenario="surge", render_mode="rgb_array")
    env.reset(seed=seed)
    policy = _ed_policy("team_heuristic", seed, env.unwrapped.hospital)
    yield env.render()
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        action = (
            None
            if terminated or truncated
            else policy.act_role(agent, obs["observation"], obs["action_mask"])
        )
        env.step(action)
        if agent == "ventilator_officer" and env.agents:
            yield env.render()
    env.close()


def parallel_frames(seed: int = 0) -> Iterator[np.ndarray]:
    """The parallel env on ``mass_casualty``: masked random actions for all three roles at once."""
    import hospital_marl

    env = hospital_marl.parallel_env(scenario="mass_casualty", render_mode="rgb_array")
    observations, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    yield env.render()
    while env.agents:
        actions = {a: int(rng.choice(np.flatnonzero(observations[a]["action_mask"]))) for a in env.agents}
        observations, *_ = env.step(actions)
        yield env.render()
    env.close()


def _gym_frames(env_id: str, scenario: str, policy_name: str, seed: int, team: bool) -> Iterator[np.ndarray]:
    import gymnasium as gym

    import hospital_marl  # noqa: F401 - registers the ids

    env = gym.make(env_id, scenario=scenario, render_mode="rgb_array")
    obs, info = env.reset(seed=seed)
    policy = _ed_policy(policy_name, seed, env.unwrapped.hospital)
    yield env.render()
    done = False
    while not done:
        if team:  # team_ppo's joint action over the concatenated 41-long mask
            action = policy.team_action(obs, env.unwrapped.action_masks())
        else:
            action = policy.act(obs, info["action_mask"])
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        yield env.render()
    env.close()


def composed_frames(seed: int = 0) -> Iterator[np.ndarray]:
    """The composed env on ``ventilator_crisis``, played by the shipped ``ppo_pruned``."""
    return _gym_frames("hospital_marl/HospitalED-v0", "ventilator_crisis", "ppo_pruned", seed, team=False)


def team_frames(seed: int = 0) -> Iterator[np.ndarray]:
    """The team env on ``normal_day``, played by the shipped ``team_ppo``."""
    return _gym_frames("hospital_marl/HospitalEDTeam-v0", "normal_day", "team_ppo", seed, team=True)


def vector_frames(seed: int = 0) -> Iterator[np.ndarray]:
    """Four departments of one ``surge`` batch (row i is the scalar env seeded ``seed + i``), 2 × 2."""
    import gymnasium as gym

    import hospital_marl  # noqa: F401

    envs = [
        gym.make("hospital_marl/HospitalED-v0", scenario="surge", render_mode="rgb_array") for _ in range(4)
    ]
    infos = [env.reset(seed=seed + i)[1] for i, env in enumerate(envs)]
    done = [False] * 4

    def tile() -> np.ndarray:
        frames = [env.render() for env in envs]
        return np.vstack([np.hstack(frames[:2]), np.hstack(frames[2:])])

    yield tile()
    while not all(done):
        for i, env in enumerate(envs):
            if not done[i]:  # the last allowed action: admissions before no-op, a cheap rule
                _, _, terminated, truncated, infos[i] = env.step(
                    int(np.flatnonzero(infos[i]["action_mask"])[-1])
                )
                done[i] = terminated or truncated
        yield tile()


def rt_frames(task: str, seed: int = 0) -> Iterator[np.ndarray]:
    """A radiotherapy task planned by the shipped PPO agent, one frame per action."""
    import gymnasium as gym

    import hospital_marl  # noqa: F401
    import policies.radiotherapy

    env = gym.make("hospital_marl/RadiotherapyPlanning-v0", task=task, render_mode="rgb_array")
    obs, _ = env.reset(seed=seed)
    policy = policies.radiotherapy.load("ppo")
    policy.reset(seed=seed, plan=env.unwrapped.plan)
    yield env.render()
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(policy.act(obs, env.unwrapped.action_masks()))
        done = terminated or truncated
        yield env.render()
    env.close()


GIFS: dict[str, tuple[Callable[[], Iterator[np.ndarray]], int, int]] = {
    "aec": (aec_frames, 2, 2),
    "parallel": (parallel_frames, 2, 2),
    "composed": (composed_frames, 2, 2),
    "team": (team_frames, 2, 2),
    "vector": (vector_frames, 3, 4),
    "rt-prostate": (lambda: rt_frames("prostate"), 2, 1),
    "rt-head-neck": (lambda: rt_frames("head_neck"), 2, 1),
    "rt-pediatric-brain": (lambda: rt_frames("pediatric_brain"), 2, 1),
}
"""GIF name -> (frames, keep every n-th frame, shrink factor)."""


RT_PALETTE = 160
"""Colours of a radiotherapy GIF's palette, drawn from its middle and last frames: the wash, the
contours and the text need more than 64, or median cut merges contour colours (cyan and green)."""


def write_gif(path: Path, frames: list[np.ndarray], every: int, shrink: int, rt: bool = False) -> None:
    kept = frames[::every]
    if kept[-1] is not frames[-1]:
        kept.append(frames[-1])  # always end on the final state
    images = [Image.fromarray(np.ascontiguousarray(f[::shrink, ::shrink])) for f in kept]
    if rt:
        both = Image.fromarray(np.vstack([np.asarray(images[len(images) // 2]), np.asarray(images[-1])]))
        palette = both.quantize(colors=RT_PALETTE, method=Image.Quantize.MEDIANCUT)
    else:
        palette = images[len(images) // 2].quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    quantised = [im.quantize(palette=palette, dither=Image.Dither.NONE) for im in images]
    durations = [120] * (len(quantised) - 1) + [1500]  # hold the last frame
    quantised[0].save(
        path, save_all=True, append_images=quantised[1:], duration=durations, loop=0, optimize=True
    )


def write_board(path: Path) -> None:
    """The labelled board, mid-shift on ``surge``, after the heuristic's decisions."""
    from hospital_marl.envs.composed import HospitalEDEnv
    from hospital_marl.envs.labelled import render_labelled

    env = HospitalEDEnv(scenario="surge")
    obs, info = env.reset(seed=0)
    policy = _ed_policy("heuristic", 0, env.hospital)
    action = None
    for _ in range(45):
        action = policy.act(obs, info["action_mask"])
        obs, *_, info = env.step(action)
    Image.fromarray(render_labelled(env.hospital, action, scale=1)).save(path, optimize=True)


def write_rt_plan(path: Path) -> None:
    """The head-and-neck plan the shipped PPO agent locks on seed 0: the last frame of its GIF."""
    *_, last = rt_frames("head_neck")
    Image.fromarray(last).save(path, optimize=True)


STILLS: dict[str, Callable[[Path], None]] = {"board": write_board, "rt-plan": write_rt_plan}
"""PNG name -> what writes it."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a picture is missing")
    parser.add_argument("--only", action="append", choices=(*GIFS, *STILLS), help="write only this picture")
    args = parser.parse_args()
    wanted = [*GIFS, *STILLS] if not args.only else args.only
    if args.check:
        missing = [n for n in wanted if not (IMAGES / (f"{n}.gif" if n in GIFS else f"{n}.png")).exists()]
        for name in missing:
            print(f"docs/images: {name} is missing: run `python tools/docs_media.py`", file=sys.stderr)
        return 1 if missing else 0
    IMAGES.mkdir(parents=True, exist_ok=True)
    for name in wanted:
        if name in STILLS:
            STILLS[name](IMAGES / f"{name}.png")
            print(f"wrote docs/images/{name}.png ({(IMAGES / f'{name}.png').stat().st_size / 1e3:.0f} kB)")
            continue
        make, every, shrink = GIFS[name]
        path = IMAGES / f"{name}.gif"
        write_gif(path, list(make()), every, shrink, rt=name.startswith("rt-"))
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
