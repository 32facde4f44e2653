"""Trainers (the ``train`` and ``rllib`` extras): above ``grading``, which they use to evaluate.

- :mod:`training.ppo`: sb3-contrib MaskablePPO on the composed (flat) or team env;
- :mod:`training.marl`: per-role learners (iterated best response, parameter sharing);
- :mod:`training.rllib`: Ray RLlib multi-agent PPO, one masked module per role;
- :mod:`training.args`, :mod:`training.common`: what they share (arguments, scenario cycle, curves);
- :mod:`training.export`: a run's model as a shipped checkpoint (``.zip`` + torch-free ``.onnx``).

What a trained model *plays* with lives below, in :mod:`policies` (``policies.load``), so that
grading and playing never import a trainer. Importing this package is cheap (no torch).
"""
