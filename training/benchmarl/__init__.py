"""Multi-agent PPO from BenchMARL (TorchRL): ``hospital-marl train benchmarl`` (the ``marl`` extra).

- :mod:`training.benchmarl.env`: the ED as a batched TorchRL ``EnvBase`` (one group per role,
  masks, global state) and the PettingZoo-wrapper path;
- :mod:`training.benchmarl.task`: the BenchMARL task (all five scenarios, and their mix);
- :mod:`training.benchmarl.train`: the arguments, MAPPO / IPPO through BenchMARL's ``Experiment``,
  periodic team-track grading, the run directory (ONNX actors that :mod:`policies.benchmarl` plays).

Importing this package is cheap: torch, TorchRL and BenchMARL load in the submodules.
"""
