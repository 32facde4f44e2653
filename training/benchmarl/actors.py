"""What the BenchMARL trainer reads off a live ``Experiment``: each role's actor as a torch module,
its logits, the actors exported as ONNX (what :mod:`policies.benchmarl` plays), and the masked-action
audit of a collected batch. Shared by :mod:`~training.benchmarl.train`,
:mod:`~training.benchmarl.callbacks` and :mod:`~training.benchmarl.warmstart` (which import it, never
each other). torch / TorchRL load inside the functions: importing this module stays cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from policies.benchmarl import onnx_role
from policies.learned import ONNX_INPUT, ONNX_OUTPUT, OnnxLogits
from policies.marl import ROLE_SCALES, MarlTeamPolicy

if TYPE_CHECKING:
    import torch


def actor_nets(experiment: Any) -> dict[str, Any]:
    """Each role's actor MLP (encoded observation -> logits, or action values for QMIX / VDN) as a
    plain torch module (a copy)."""
    from torchrl.modules import MultiAgentMLP

    nets = {}
    for role in ROLES:
        mlps = [m for m in experiment.group_policies[role].modules() if isinstance(m, MultiAgentMLP)]
        if len(mlps) != 1:
            raise RuntimeError(f"expected one MultiAgentMLP in the {role} actor, found {len(mlps)}")
        nets[role] = mlps[0].get_stateful_net(copy=True).eval()
    return nets


def export_actors(experiment: Any, out: Path) -> dict[str, str]:
    """Write ``out/<role>.onnx`` (input ``features`` (batch, d_role), output ``logits``); the ONNX
    must reproduce BenchMARL's own actor logits (checked on random inputs before it is kept)."""
    import warnings

    import torch

    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for role, net in actor_nets(experiment).items():
        path = out / f"{role}.onnx"
        d = len(ROLE_SCALES[role])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                net,
                (torch.zeros(1, d),),
                str(path),
                input_names=[ONNX_INPUT],
                output_names=[ONNX_OUTPUT],
                dynamic_axes={ONNX_INPUT: {0: "batch"}, ONNX_OUTPUT: {0: "batch"}},
                opset_version=17,
                dynamo=False,
            )
        probe = torch.rand(d) * 3
        with torch.no_grad():
            expected = benchmarl_logits(experiment, role, probe.numpy())
        got = OnnxLogits(path)(probe.numpy())
        if got.shape != (ROLE_ACTION_COUNTS[role],) or not np.allclose(got, expected, atol=1e-4):
            raise RuntimeError(f"the exported {role} actor does not reproduce BenchMARL's logits")
        files[role] = path.relative_to(out.parent).as_posix()
    return files


def benchmarl_logits(experiment: Any, role: str, features: np.ndarray) -> np.ndarray:
    """The logits (QMIX / VDN: action values) BenchMARL's own ``role`` actor computes for one encoded
    observation (:func:`~training.benchmarl.warmstart.actor_logits` on a batch of one)."""
    import torch

    with torch.no_grad():
        logits = actor_logits(experiment, role, torch.as_tensor(features, dtype=torch.float32).reshape(1, -1))
    return logits.reshape(-1).numpy()


def actor_td(role: str, observations: torch.Tensor) -> Any:
    from tensordict import TensorDict

    n = observations.shape[0]
    return TensorDict(
        {role: TensorDict({"observation": observations.unsqueeze(1)}, batch_size=(n, 1))}, batch_size=(n,)
    )


def actor_logits(experiment: Any, role: str, observations: torch.Tensor) -> torch.Tensor:
    """BenchMARL's ``role`` actor MLP (the module PPO trains) on (N, d) encoded observations: (N, n)."""
    net = experiment.group_policies[role].module[0]
    td = net(actor_td(role, observations))
    return td.get(net.out_keys[0])[:, 0]


def load_benchmarl_policy_dir(run_dir: Path, which: str, algorithm: str) -> MarlTeamPolicy:
    """The actors in ``run_dir/which`` as a team policy (before ``benchmarl.json`` exists)."""

    roles = {role: onnx_role(role, run_dir / which / f"{role}.onnx") for role in ROLES}
    return MarlTeamPolicy(roles, name=f"{algorithm}_{which}")


def masked_actions_taken(batch: Any) -> tuple[int, int]:
    """(actions the role's mask forbade, actions) in a TorchRL batch of this task's env."""
    import torch

    taken = total = 0
    for role in ROLES:
        action = batch.get((role, "action")).long()
        allowed = torch.gather(batch.get((role, "action_mask")), -1, action.unsqueeze(-1))
        taken += int((~allowed).sum())
        total += action.numel()
    return taken, total
