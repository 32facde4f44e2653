"""Ray RLlib training (the ``rllib`` extra): ``hospital-marl train rllib``.

- :mod:`training.rllib.env`: the AEC env as an RLlib ``MultiAgentEnv`` (RLlib's ``PettingZooEnv``),
  registered as ``"hospital_marl_aec"``;
- :mod:`training.rllib.callbacks`: the masked-action audit;
- :mod:`training.rllib.train`: the arguments, the RLlib config, :func:`~training.rllib.train.train`.

The module each role learns (:mod:`policies.rllib.module`) and the loader of a trained run
(:func:`policies.rllib.load_rllib_policy`) live in :mod:`policies.rllib`. Importing this package
is cheap (no ray, no torch).
"""
