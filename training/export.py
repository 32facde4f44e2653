"""A run's model as a shipped checkpoint: ``OUT.zip`` (SB3), ``OUT.onnx`` (torch-free), ``OUT.json``.

``hospital-marl train export RUN_DIR OUT.zip`` writes all three for a ``train ppo`` run; for a
``train marl`` or ``train rllib`` run, ``train export RUN_DIR OUT_DIR`` copies what loading and
the learning curve need (:func:`export_run`: metadata, curve, the models, no optimizer state).
The ONNX file holds the actor only (encoded features -> the action logits, the same function
:class:`policies.learned.TorchLogits` computes), which is all a graded policy needs;
:func:`policies.load` plays it with onnxruntime, so the core install needs no torch.
``python -m training.export --shipped`` re-derives the ``.onnx`` of every shipped ``.zip``.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from policies.learned import CHECKPOINT_DIR, FEATURE_SIZE, ONNX_INPUT, ONNX_OUTPUT, SHIPPED, load_model
from training.ppo import Args

ONNX_OPSET = 17
"""The ONNX opset every exported model uses (onnxruntime plays it; see :func:`torch_to_onnx`)."""


def torch_to_onnx(
    module: Any,
    example_inputs: tuple[Any, ...],
    path: Path,
    input_names: Sequence[str] = (ONNX_INPUT,),
    output_names: Sequence[str] = (ONNX_OUTPUT,),
    batch_axis: bool = True,
    ignore: type[Warning] = DeprecationWarning,
) -> Path:
    """The project's one ``torch.onnx.export`` call: every trainer's actor goes through it, with
    :data:`ONNX_OPSET` and the TorchScript exporter (``dynamo=False``: no onnxscript needed; torch
    calls it legacy, hence the ``ignore``d warning category). ``batch_axis`` makes dimension 0 of
    every input and output dynamic (a recurrent step is exported for a batch of one)."""
    import torch

    dynamic_axes = {name: {0: "batch"} for name in (*input_names, *output_names)} if batch_axis else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ignore)
        torch.onnx.export(
            module,
            example_inputs,
            str(path),
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_axes=dynamic_axes,
            opset_version=ONNX_OPSET,
            dynamo=False,
        )
    return path


def export_onnx(model_zip: Path, out: Path) -> Path:
    """The actor of a MaskablePPO ``.zip`` as ONNX: input ``features`` (batch, FEATURE_SIZE) float32,
    output ``logits`` (batch, actions). Same weights, so the same argmax as the torch model."""
    import torch

    policy = load_model(model_zip).policy.eval()

    class Actor(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.policy = policy

        def forward(self, features: torch.Tensor) -> torch.Tensor:
            p = self.policy
            latent = p.mlp_extractor.forward_actor(p.extract_features(features, p.pi_features_extractor))
            return p.action_net(latent)

    return torch_to_onnx(Actor().eval(), (torch.zeros(1, FEATURE_SIZE),), out)


def strip_optimizer(src: Path, dst: Path) -> Path:
    """Copy an SB3 ``.zip`` with the optimizer's state emptied (inference needs no Adam moments)."""
    import torch

    dst.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item)
            if item.filename == "policy.optimizer.pth":
                state = torch.load(io.BytesIO(data), map_location="cpu")
                state["state"] = {}
                buffer = io.BytesIO()
                torch.save(state, buffer)
                data = buffer.getvalue()
            zout.writestr(item, data)
    return dst


def export_run(run_dir: Path, out: Path) -> Path:
    """A ``train marl`` or ``train rllib`` run as a small directory that loads the same way.

    marl: ``model.json``, ``curve.json`` and every model it names, optimizer state emptied.
    rllib: ``rllib.json``, ``curve.json`` and the per-role module checkpoints (``modules``, what
    :func:`policies.rllib.load_rllib_policy` reads, and the last iteration's ``final_modules``,
    loadable from ``OUT_DIR/checkpoint``; not the learner's optimizer or env runners).
    """
    from policies.marl import METADATA_FILE, is_marl_run
    from policies.rllib import METADATA_FILE as RLLIB_FILE
    from policies.rllib import is_rllib_run

    out.mkdir(parents=True, exist_ok=True)
    if is_marl_run(run_dir):
        meta = json.loads((run_dir / METADATA_FILE).read_text())
        files = set(meta["models"].values()) | set((meta.get("best") or {}).get("models", {}).values())
        for name in sorted(files):
            strip_optimizer(run_dir / name, out / name)
        shutil.copy2(run_dir / METADATA_FILE, out / METADATA_FILE)
    elif (run_dir / RLLIB_FILE).is_file() and is_rllib_run(run_dir):
        meta = json.loads((run_dir / RLLIB_FILE).read_text())
        for module in {*meta["modules"].values(), *meta.get("final_modules", {}).values()}:
            shutil.copytree(run_dir / module, out / module, dirs_exist_ok=True)
        shutil.copy2(run_dir / RLLIB_FILE, out / RLLIB_FILE)
    else:
        raise FileNotFoundError(
            f"{run_dir} is not a `train marl` (model.json) or `train rllib` (rllib.json) run"
        )
    if (run_dir / "curve.json").is_file():
        shutil.copy2(run_dir / "curve.json", out / "curve.json")
    return out


def export_checkpoint(run_dir: Path, out: Path) -> Path:
    """Ship a run's best model: ``out`` (.zip), ``out.onnx`` and ``out.json`` (its metadata, the
    learning curve, the whole run's cost, and the exact command, re-derived from the recorded args).

    The zip is ``best_model.zip`` with the optimizer's state emptied: inference needs no Adam
    moments, and the file shrinks several-fold. The weights are untouched.
    """
    meta = json.loads((run_dir / "best_model.json").read_text())
    meta["command"] = Args.from_json(meta["args"]).command_line()
    final = json.loads((run_dir / "model.json").read_text())
    meta["run"] = {k: final[k] for k in ("timesteps", "wall_time_s", "cpu_time_s")}
    meta["curve"] = json.loads((run_dir / "curve.json").read_text())
    if (run_dir / "clone.json").exists():  # --warm-start: how well the clone fitted its expert
        meta["warm_start"] = json.loads((run_dir / "clone.json").read_text())
    meta["exported"] = "best_model.zip, optimizer state emptied (inference only; weights unchanged)"
    strip_optimizer(run_dir / "best_model.zip", out)
    export_onnx(out, out.with_suffix(".onnx"))
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m training.export --shipped``: rewrite the ``.onnx`` beside every shipped ``.zip``."""
    parser = argparse.ArgumentParser(prog="python -m training.export", description=main.__doc__)
    parser.add_argument("--shipped", action="store_true", required=True, help="every checkpoint in SHIPPED")
    parser.parse_args(argv)
    for file in SHIPPED.values():
        print(export_onnx(CHECKPOINT_DIR / file, (CHECKPOINT_DIR / file).with_suffix(".onnx")))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
