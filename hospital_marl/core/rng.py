"""The simulation's random numbers: a counter-based generator evaluated inside the kernel.

Every random draw of an episode is a pure function of (key, domain, i, j): the
row's 64-bit key (from the seed), which kind of draw it is (``D_*``), and two
indices saying which one (e.g. patient id and tick). Nothing is pre-drawn and no
generator state advances, so

* a day is a key, not arrays (no per-patient, per-tick uniforms in memory);
* common random numbers hold by construction: a draw's value depends on what it
  is, never on how many other draws the actions caused before it;
* ``imagine(seed)`` is "the same present, a new key for every unrevealed draw".

The function is SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom
number generators", OOPSLA 2014) evaluated at a counter: ``mix(key + (c + 1) * γ)``
with ``c`` the packed (domain, i, j), i.e. the c-th output of the SplitMix64 stream
seeded with ``key``. Its authors tested its streams with DieHarder and TestU01 and
found them "adequate for 'everyday' use, such as in Monte Carlo algorithms" (the paper's
abstract); no stronger claim is made here. A uniform is the top 53 bits, in [0, 1).
Distinct (domain, i, j) with ``i, j < 2**28`` are distinct counters, hence distinct
stream positions.

Written by hand because it has to run inside numba-compiled rules per draw
(NumPy's ``Philox``/``SFC64`` are stateful generator objects numba cannot index by
counter); it is eight integer operations.
"""

from __future__ import annotations

import hashlib
import math
import os
from typing import Any

import numpy as np
from numba import njit

GAMMA = 0x9E3779B97F4A7C15
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK = (1 << 64) - 1
_G, _M1, _M2 = np.uint64(GAMMA), np.uint64(_MIX1), np.uint64(_MIX2)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_S56, _S28, _ONE = np.uint64(56), np.uint64(28), np.uint64(1)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53

# What a draw is for (the counter's top byte). i, j as listed.
D_COUNT = 0  # background arrivals of tick i (j: part of a split Poisson draw)
D_BURST_COUNT = 1  # burst arrivals of tick i (j: part)
D_SEVERITY = 2  # severity of the j-th arrival of tick i
D_CONDITION = 3  # condition of the j-th arrival of tick i
D_Q_GENERAL = 4  # general-bed treatment quantile of the j-th arrival of tick i
D_Q_ICU = 5  # ICU treatment quantile of the j-th arrival of tick i
D_DYNAMICS = 6  # patient i's dynamics uniform at tick j (deterioration, improvement, death)
D_BOUNCE = 7  # the i-th early discharge: j = 0 bounces back?, j = 1 the delay
D_PENDING = 8  # imagine(): patient i's pending bounce-back redrawn, j = 0 / 1 as above
D_QUANTILE = 9  # imagine(): patient i's unrevealed treatment quantile redrawn, j = 0 general / 1 ICU
D_SERVICE = 10  # patient i's treatment progresses at tick j? (drawn only when the service speed < 1)

JIT_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "_nrt": False}
"""The kernel's numba settings (:mod:`hospital_marl.core.kernel.common` explains ``_nrt``)."""
_jit = njit(**JIT_OPTIONS)

POISSON_CHUNK = 30.0
"""Poisson draws with λ above this are the sum of ceil(λ / 30) Poisson(λ / m) draws (exact by
additivity), so inversion never starts from an underflowing e^-λ."""


@_jit
def _mix(z: np.uint64) -> np.uint64:
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@_jit
def uniform(key: int, domain: int, i: int, j: int) -> float:
    """The draw (domain, i, j) of the stream ``key`` (an int64 holding the 64 key bits): in [0, 1)."""
    c = (np.uint64(domain) << _S56) | (np.uint64(i) << _S28) | np.uint64(j)
    z = _mix(np.uint64(key) + (c + _ONE) * _G)
    return (z >> _S11) * _TO_UNIT


@_jit
def poisson(lam: float, key: int, domain: int, i: int) -> int:
    """A Poisson(λ) count by inversion of its cdf (exact up to rounding; one uniform per
    chunk of λ, see :data:`POISSON_CHUNK`)."""
    if lam <= 0.0:
        return 0
    parts = int(math.ceil(lam / POISSON_CHUNK))  # noqa: RUF046 - numba needs the int
    lam_part = lam / parts
    total = 0
    for part in range(parts):
        u = uniform(key, domain, i, part)
        p = math.exp(-lam_part)
        cdf = p
        k = 0
        while u >= cdf and p > 0.0:  # P(X <= k) > u: the smallest such k
            k += 1
            p *= lam_part / k
            cdf += p
        total += k
    return total


@_jit
def categorical(cdf, u: float) -> int:
    """1-based category of a uniform under a cumulative distribution (last entry 1): the first
    index whose cdf exceeds u (``searchsorted(side="right")``, NumPy's own ``choice``)."""
    n = cdf.shape[0]
    for k in range(n - 1):
        if u < cdf[k]:
            return k + 1
    return n


def _py_mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK
    return z ^ (z >> 31)


def _as_int64(bits: int) -> int:
    return bits - (1 << 64) if bits >= 1 << 63 else bits


_IMAGINE_TAG = 0x1A6E_5EED_0F_F17E  # keeps imagine(s)'s keys apart from reset(seed=s)'s


def seed_key(seed: int) -> int:
    """The episode key of a non-negative int seed (any size; seeds up to 2**63-1 arrive over the
    wire, vector envs add the env index): SplitMix64 of the seed's 64-bit words. As int64."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"a seed must be a non-negative int, got {seed!r}")
    seed = int(seed)
    z = GAMMA
    while True:
        z = _py_mix((z + (seed & _MASK) + GAMMA) & _MASK)
        seed >>= 64
        if not seed:
            return _as_int64(z)


def seed_keys(seeds: np.ndarray) -> np.ndarray:
    """:func:`seed_key` of many seeds below 2**64 at once (NumPy's wrapping uint64 arithmetic;
    the vector envs key the next days they draw ahead this way). As int64."""
    z = np.asarray(seeds).astype(np.uint64) + np.uint64((2 * GAMMA) & _MASK)  # the one-word case
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return (z ^ (z >> np.uint64(31))).view(np.int64)


def imagine_key(seed: int | np.random.SeedSequence, salt: int = 0) -> int:
    """The key of an imagined future (:meth:`Hospital.imagine`): never an episode's key for the
    same seed, so ``imagine(s)`` cannot replay the real future of the episode seeded ``s``.

    ``salt`` (64 bits; a sealed handle's, see :func:`seal_salt`) keys the futures of one
    sealed episode apart from everything a policy could compute without it; 0 leaves the
    key as :meth:`Hospital.imagine` on a simulator of one's own makes it."""
    if isinstance(seed, np.random.SeedSequence):
        base = int(seed.generate_state(1, np.uint64)[0])
    else:
        base = _py_mix((seed_key(seed) ^ _IMAGINE_TAG) & _MASK)
    if salt:
        base = _py_mix((base ^ salt) & _MASK)
    return _as_int64(base)


def seal_salt(seed: int | None) -> int:
    """The 64-bit salt of a sealed view of the episode seeded ``seed`` (SPEC §12): a one-way
    function of the seed (BLAKE2b), so the salt a policy can reach reproduces the grading
    (same seed, same imagined futures) without revealing the seed, hence the day. A day
    from fresh entropy (``seed=None``) gets a fresh salt."""
    if seed is None:
        return int.from_bytes(os.urandom(8), "little") | 1
    digest = hashlib.blake2b(str(int(seed)).encode(), digest_size=8, person=b"hm-sealed").digest()
    return int.from_bytes(digest, "little") | 1  # never 0 (0 means "unsalted")


def fresh_key() -> int:
    """A key from fresh OS entropy (``reset(seed=None)``)."""
    return seed_key(int(np.random.SeedSequence().entropy))  # type: ignore[arg-type]


@_jit
def fill_dynamics(key: int, out) -> None:
    """``out[pid, t]`` = patient pid's dynamics uniform at tick t (the day's ``latent`` view)."""
    for pid in range(out.shape[0]):
        for t in range(out.shape[1]):
            out[pid, t] = uniform(key, D_DYNAMICS, pid, t)
