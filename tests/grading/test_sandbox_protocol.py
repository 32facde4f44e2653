"""The sandbox's plumbing without a sandbox (cheap): how arrays cross in requests, and what the
trusted bytecode cache holds (SPEC §13; the attacks on both are in test_sandbox_attacks.py)."""

from __future__ import annotations

import importlib.util
import pickle
import sys
from pathlib import Path

import numpy as np

import grading.isolated
import tests.grading.sandbox_attacks
from grading.frames import pack, unpack
from grading.sandbox import bytecode_cache
from hospital_marl.envs.composed import HospitalEDEnv


def test_observations_and_masks_cross_as_equal_writable_arrays() -> None:
    env = HospitalEDEnv(scenario="surge")
    obs, info = env.reset(seed=3)
    for _ in range(5):
        obs, *_, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    got = unpack(pickle.loads(pickle.dumps(pack(obs))))
    assert list(got) == list(obs)
    for key, value in obs.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape
        np.testing.assert_array_equal(got[key], value)
        assert got[key].flags.writeable
    got[next(iter(got))][...] = 7  # one array written: the others are untouched
    assert all(np.array_equal(got[k], obs[k]) for k in list(obs)[1:])
    mask = unpack(pickle.loads(pickle.dumps(pack(info["action_mask"]))))
    assert mask.dtype == np.bool_ and np.array_equal(mask, info["action_mask"])


def test_anything_else_crosses_as_it_is() -> None:
    for value in (3, "role", None, {}, ("flat", 2)):
        assert pack(value)[0] == "value" and unpack(pickle.loads(pickle.dumps(pack(value)))) == value
    mixed = {"a": np.arange(3), "b": 1}
    assert pack(mixed)[0] == "value"
    got = unpack(pickle.loads(pickle.dumps(pack(mixed))))
    assert got["b"] == 1 and np.array_equal(got["a"], mixed["a"])
    objects = np.array([{"a": 1}, None], dtype=object)  # never the raw bytes of object pointers
    assert pack(objects)[0] == pack({"x": objects})[0] == "value"
    assert unpack(pickle.loads(pickle.dumps(pack(objects)))).tolist() == objects.tolist()


def test_the_bytecode_cache_holds_checked_hash_pycs_of_trusted_sources_only() -> None:
    """Compiled from the interpreter's and the project's sources the grader has imported
    (numpy's, the grader's own), never from a module outside them (here: the attackers' module
    the tests import), and checked-hash: Python uses a pyc only for the very source it was
    compiled from."""
    root = bytecode_cache()
    assert root is not None
    tag = sys.implementation.cache_tag

    def cached(module) -> Path:
        source = Path(module.__file__).resolve()
        return Path(root, *source.parent.parts[1:], f"{source.stem}.{tag}.pyc")

    for module in (np, grading.isolated):
        pyc = cached(module).read_bytes()
        assert pyc[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(pyc[4:8], "little") == 0b11  # hash-based, checked
        assert pyc[8:16] == importlib.util.source_hash(Path(module.__file__).read_bytes())
    assert not cached(tests.grading.sandbox_attacks).exists()
