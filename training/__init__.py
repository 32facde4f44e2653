"""Trainers (the ``train``, ``rllib`` and ``marl`` extras), beside ``grading``: they are *given* the
function that grades them, ``train(args, evaluate)`` (:class:`training.common.Evaluate`, the signature
of :func:`grading.grade`; the command line passes the grader), and never import it.

- :mod:`training.ppo`: sb3-contrib MaskablePPO on the composed (flat) or team env;
- :mod:`training.marl`: per-role learners (iterated best response, parameter sharing);
- :mod:`training.benchmarl`: BenchMARL's MAPPO / IPPO on the batched TorchRL env;
- :mod:`training.rllib`: Ray RLlib multi-agent PPO, one masked module per role (logs RLlib's own
  returns; it grades nothing, so its ``train(args)`` takes no evaluation function);
- :mod:`training.radiotherapy`: MaskablePPO on the radiotherapy planning env (given ``grade_all``);
- :mod:`training.args`, :mod:`training.common`: what they share (arguments, scenario cycle, curves);
- :mod:`training.export`: a run's model as a shipped checkpoint (``.zip`` + torch-free ``.onnx``).

What a trained model *plays* with lives below, in :mod:`policies` (``policies.load``), so that
grading and playing never import a trainer. Importing this package is cheap (no torch).
"""
