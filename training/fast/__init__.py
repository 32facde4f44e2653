"""Single-file PPO-family trainers on the natively batched envs, at the box's speed (torch only).

- :mod:`training.fast.mappo`: MAPPO / IPPO, team reward, one actor per role (or one shared);
- :mod:`training.fast.ppo`: masked PPO for the flat (``Discrete(39)``) and team (``MultiDiscrete``) tracks;
- :mod:`training.fast.common`: what both share (MLP, masked sampling, GAE, clipped loss, ONNX export).

Importing this package is cheap: torch loads in the submodules.
"""
