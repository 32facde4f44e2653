"""Scenarios: frozen data in one registry.

A scenario is a value, not a subclass. Users define their own by building a
:class:`Scenario` (validated on construction) and optionally registering it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from hospital_marl.core.actions import MAX_ICU_BEDS, MAX_VENTILATORS
from hospital_marl.core.constants import CONDITIONS, MAX_GENERAL_BEDS, N_SEVERITIES
from hospital_marl.core.constants import condition_id as condition_id_of


def _as_mix(owner: str, name: str, mix: Any) -> tuple[float, ...]:
    try:
        return tuple(float(p) for p in mix)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}.{name} must be a sequence of probabilities, got {mix!r}") from None


def _check_mix(owner: str, name: str, mix: tuple[float, ...], size: int) -> None:
    if len(mix) != size:
        raise ValueError(f"{owner}.{name} must have {size} entries, got {len(mix)}: {mix!r}")
    if any((not math.isfinite(p)) or p < 0 for p in mix):
        raise ValueError(f"{owner}.{name} must be non-negative finite probabilities, got {mix!r}")
    if abs(sum(mix) - 1.0) > 1e-6:
        raise ValueError(f"{owner}.{name} must sum to 1, got {mix!r} (sum {sum(mix):.6g})")


def _check_int(owner: str, name: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{owner}.{name} must be an int in [{low}, {high}], got {value!r}")


def _check_real(owner: str, name: str, value: object, low: float, high: float = math.inf) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not low <= value <= high:  # type: ignore[operator]
        bounds = f">= {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
        raise ValueError(f"{owner}.{name} must be a finite number {bounds}, got {value!r}")


@dataclass(frozen=True)
class Burst:
    """A burst of extra arrivals (mass casualty): Poisson(``rate``) per tick in [start, end]."""

    start: int
    end: int
    rate: float
    condition: int  # condition id 1..5
    severity_mix: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity_mix", _as_mix("Burst", "severity_mix", self.severity_mix))
        _check_int("Burst", "start", self.start, 0, 1_000_000)
        _check_int("Burst", "end", self.end, 0, 1_000_000)
        if self.end < self.start:
            raise ValueError(f"Burst.end must be >= start ({self.start}), got {self.end!r}")
        _check_real("Burst", "rate", self.rate, 0.0)
        _check_int("Burst", "condition", self.condition, 1, len(CONDITIONS))
        _check_mix("Burst", "severity_mix", self.severity_mix, N_SEVERITIES)


@dataclass(frozen=True)
class Outage:
    """Ventilators out of service for part of the day (a mid-day resource shock): at every
    decision from tick ``start`` to tick ``end`` (inclusive) the ``ventilators``
    highest-numbered ventilators take no new patient. One in use when the outage begins stays
    with its patient until it is released (weaning, discharge, death): a ventilator is not
    taken off a ventilated patient."""

    start: int
    end: int
    ventilators: int

    def __post_init__(self) -> None:
        _check_int("Outage", "start", self.start, 0, 1_000_000)
        _check_int("Outage", "end", self.end, 0, 1_000_000)
        if self.end < self.start:
            raise ValueError(f"Outage.end must be >= start ({self.start}), got {self.end!r}")
        _check_int("Outage", "ventilators", self.ventilators, 1, 2)


@dataclass(frozen=True)
class Scenario:
    """One ED day: resources, arrival profile and case mix.

    Arrivals per tick are Poisson with rate
    ``arrival_rate * (1 + amplitude * cos(2*pi*(t - peak) / episode_length))``
    plus the optional burst.
    """

    name: str
    description: str = ""
    general_beds: int = 20
    icu_beds: int = 5
    ventilators: int = 3
    episode_length: int = 100
    max_deaths: int = 40
    arrival_rate: float = 0.85
    amplitude: float = 0.30
    peak: float = 35.0
    severity_mix: tuple[float, ...] = (0.12, 0.34, 0.39, 0.12, 0.03)
    condition_mix: tuple[float, ...] = (0.22, 0.20, 0.22, 0.22, 0.14)
    burst: Burst | None = None
    service_profile: tuple[float, ...] = ()
    """Staffing: the probability per tick that adequate care advances a patient's treatment, as
    k equal periods of the episode (24 entries = by hour); () = 1 at every tick (full speed)."""
    outage: Outage | None = None
    """Ventilators out of service for part of the day (never the last one); None: no outage."""

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "service_profile", _as_mix("Scenario", "service_profile", self.service_profile)
        )
        if any(not 0.0 < v <= 1.0 for v in self.service_profile):
            raise ValueError(
                f"Scenario.service_profile entries must lie in (0, 1], got {self.service_profile!r}"
            )
        object.__setattr__(self, "severity_mix", _as_mix("Scenario", "severity_mix", self.severity_mix))
        object.__setattr__(self, "condition_mix", _as_mix("Scenario", "condition_mix", self.condition_mix))
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Scenario.name must be a non-empty string, got {self.name!r}")
        # SPEC §3's action table addresses 5 ICU beds and 3 ventilators; general beds are
        # addressed through the sorted board (top five, bottom five), so only the state's
        # width (MAX_GENERAL_BEDS) limits them, and the board observation shows 20 of them.
        for name, low, high in (
            ("general_beds", 1, MAX_GENERAL_BEDS),
            ("icu_beds", 1, MAX_ICU_BEDS),
            ("ventilators", 1, MAX_VENTILATORS),
            ("episode_length", 1, 10_000),
            ("max_deaths", 1, 1_000_000),
        ):
            _check_int("Scenario", name, getattr(self, name), low, high)
        _check_real("Scenario", "arrival_rate", self.arrival_rate, 0.0)
        _check_real("Scenario", "amplitude", self.amplitude, 0.0, 1.0)
        _check_real("Scenario", "peak", self.peak, -math.inf)
        if not isinstance(self.description, str):
            raise ValueError(f"Scenario.description must be a string, got {self.description!r}")
        _check_mix("Scenario", "severity_mix", self.severity_mix, N_SEVERITIES)
        _check_mix("Scenario", "condition_mix", self.condition_mix, len(CONDITIONS))
        if self.burst is not None and not isinstance(self.burst, Burst):
            raise ValueError(f"Scenario.burst must be a Burst or None, got {self.burst!r}")
        if self.outage is not None:
            if not isinstance(self.outage, Outage):
                raise ValueError(f"Scenario.outage must be an Outage or None, got {self.outage!r}")
            if self.outage.ventilators >= self.ventilators:
                raise ValueError(
                    f"Scenario.outage takes {self.outage.ventilators} of {self.ventilators} ventilators "
                    "out of service: at least one must stay"
                )

    def arrival_rates(self) -> list[float]:
        """λ(t) for t = 0 .. episode_length-1 (without the burst)."""
        n = self.episode_length
        return [
            self.arrival_rate * (1 + self.amplitude * math.cos(2 * math.pi * (t - self.peak) / n))
            for t in range(n)
        ]

    def service_speeds(self) -> list[float]:
        """The service speed of each tick t = 0 .. episode_length-1 (see ``service_profile``)."""
        n, k = self.episode_length, len(self.service_profile)
        if not k:
            return [1.0] * n
        return [self.service_profile[t * k // n] for t in range(n)]

    @property
    def expected_arrivals(self) -> float:
        """Expected arrivals per episode, burst included."""
        total = sum(self.arrival_rates())
        if self.burst is not None:
            ticks = max(0, min(self.burst.end, self.episode_length - 1) - self.burst.start + 1)
            total += ticks * self.burst.rate
        return total

    def with_overrides(self, **changes: object) -> Scenario:
        """A validated copy with some fields changed (``dataclasses.replace``)."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise ValueError(f"unknown Scenario field(s): {sorted(unknown)}")
        return replace(self, **changes)  # type: ignore[arg-type]


_NORMAL_SEVERITY = (0.12, 0.34, 0.39, 0.12, 0.03)
_NORMAL_CONDITIONS = (0.22, 0.20, 0.22, 0.22, 0.14)

SCENARIOS: dict[str, Scenario] = {}
"""The registry: name -> Scenario. The five built-ins are listed first."""
DISTRIBUTIONS: dict[str, ScenarioDistribution] = {}
"""The registry's distributions: name -> :class:`ScenarioDistribution` (one namespace with
:data:`SCENARIOS`: a name is a scenario or a distribution, never both)."""


def register_scenario(scenario: Scenario, *, overwrite: bool = False) -> Scenario:
    """Add a user-defined scenario to the registry so it is selectable by name."""
    if not isinstance(scenario, Scenario):
        raise ValueError(f"register_scenario expects a Scenario, got {type(scenario).__name__}")
    if scenario.name in DISTRIBUTIONS:
        raise ValueError(f"{scenario.name!r} is a registered distribution")
    if scenario.name in SCENARIOS and not overwrite:
        raise ValueError(f"scenario {scenario.name!r} is already registered (pass overwrite=True)")
    SCENARIOS[scenario.name] = scenario
    return scenario


for _s in (
    Scenario(
        name="normal_day",
        description="steady-state triage, mild-leaning mix",
        arrival_rate=0.85,
        amplitude=0.30,
        peak=35,
        severity_mix=_NORMAL_SEVERITY,
        condition_mix=_NORMAL_CONDITIONS,
    ),
    Scenario(
        name="surge",
        description="respiratory wave: sustained pressure, respiratory-heavy and more severe",
        arrival_rate=1.10,
        amplitude=0.15,
        peak=35,
        severity_mix=(0.05, 0.20, 0.35, 0.25, 0.15),
        condition_mix=(0.12, 0.50, 0.10, 0.18, 0.10),
    ),
    Scenario(
        name="mass_casualty",
        description="a sudden trauma burst on a normal background",
        arrival_rate=0.85,
        amplitude=0.30,
        peak=35,
        severity_mix=_NORMAL_SEVERITY,
        condition_mix=_NORMAL_CONDITIONS,
        burst=Burst(start=30, end=33, rate=5.0, condition=3, severity_mix=(0.0, 0.0, 0.2, 0.5, 0.3)),
    ),
    Scenario(
        name="night_shift",
        description="sparse arrivals: punishes waste and panic ventilator use",
        arrival_rate=0.35,
        amplitude=0.20,
        peak=10,
        severity_mix=(0.22, 0.40, 0.29, 0.07, 0.02),
        condition_mix=_NORMAL_CONDITIONS,
    ),
    Scenario(
        name="ventilator_crisis",
        description="80% respiratory, mostly severity >= 3: the 3 ventilators bind",
        arrival_rate=0.80,
        amplitude=0.20,
        peak=35,
        severity_mix=(0.05, 0.20, 0.45, 0.20, 0.10),
        condition_mix=(0.05, 0.80, 0.05, 0.05, 0.05),
    ),
):
    register_scenario(_s)

BUILTIN_SCENARIOS: tuple[str, ...] = tuple(SCENARIOS)
"""The five named scenarios, in table order."""

register_scenario(
    SCENARIOS["night_shift"].with_overrides(
        name="night_shift_lean",
        description="a night in a lean night-time department (5 beds, 2 ICU, 1 ventilator), a little busier, "
        "sicker and more respiratory: separates agents where night_shift saturates (docs/generalisation.md)",
        general_beds=5,
        icu_beds=2,
        ventilators=1,
        arrival_rate=0.5,
        severity_mix=(0.10, 0.30, 0.35, 0.18, 0.07),
        condition_mix=(0.15, 0.35, 0.15, 0.20, 0.15),
    )
)
"""A harder tier of the night shift, outside the five built-ins (the scoreboards keep those)."""

DEFAULT_SCENARIO = "normal_day"


def get_scenario(scenario: str | Scenario | Mapping[str, object] | None = None) -> Scenario:
    """Resolve a name, a Scenario, or a mapping of fields to a Scenario.

    A mapping may name a registered ``base`` scenario and override fields.
    """
    if scenario is None:
        return SCENARIOS[DEFAULT_SCENARIO]
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, str):
        try:
            return SCENARIOS[scenario]
        except KeyError:
            raise ValueError(f"unknown scenario {scenario!r}; valid names: {', '.join(SCENARIOS)}") from None
    if isinstance(scenario, Mapping):
        spec = dict(scenario)
        base = get_scenario(spec.pop("base", DEFAULT_SCENARIO))  # type: ignore[arg-type]
        burst = spec.get("burst")
        if isinstance(burst, Mapping):
            spec["burst"] = Burst(**burst)
        outage = spec.get("outage")
        if isinstance(outage, Mapping):
            spec["outage"] = Outage(**outage)
        spec.setdefault("name", f"{base.name}_custom")
        return base.with_overrides(**spec)
    raise ValueError(f"scenario must be a name, a Scenario or a mapping, got {type(scenario).__name__}")


def scenario_names(scenarios: Iterable[str | Scenario] | None = None) -> list[str]:
    """Names of the given scenarios (default: the five built-ins)."""
    if scenarios is None:
        return list(BUILTIN_SCENARIOS)
    return [get_scenario(s).name for s in scenarios]


__all__ = [
    "BUILTIN_SCENARIOS",
    "CONDITIONS",
    "DEFAULT_SCENARIO",
    "DISTRIBUTIONS",
    "SCENARIOS",
    "SPLITS",
    "Burst",
    "Outage",
    "Scenario",
    "ScenarioDistribution",
    "get_scenario",
    "register_distribution",
    "register_scenario",
    "resolve_scenario",
    "scenario_names",
]


# ------------------------------------------------------------------ distributions
_SCENARIO_TAG = 0x5CE7_A210_D157_0001
"""Keeps a seed's scenario draws apart from its day's (the scenario has its own stream)."""
_MASK64 = (1 << 64) - 1
NIGHT_START_HOUR, NIGHT_END_HOUR = 22, 7
"""A distribution's night staffing applies from 22:00 to 07:00 (tick 0 = midnight)."""
_GAMMA = 0x9E3779B97F4A7C15


def _mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _seed_bits(seed: int) -> int:
    """SplitMix64 of the seed's 64-bit words (the same function as ``rng.seed_key``, unsigned)."""
    z = _GAMMA
    while True:
        z = _mix64((z + (seed & _MASK64) + _GAMMA) & _MASK64)
        seed >>= 64
        if not seed:
            return z


class _Draws:
    """The scenario stream of one seed: the counter-based generator of SPEC §2 (SplitMix64 at a
    counter, as :func:`hospital_marl.core.rng.uniform`), keyed by the seed's key mixed with a tag
    and the distribution's name, so sampling a scenario draws nothing from the day's stream and
    two registered distributions do not share their draws."""

    def __init__(self, seed: int, name: str) -> None:
        salt = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")
        self.key = _mix64(_seed_bits(seed) ^ _SCENARIO_TAG ^ salt)

    def uniform(self, i: int, j: int = 0) -> float:
        c = (i << 28) | j
        return (_mix64((self.key + (c + 1) * _GAMMA) & _MASK64) >> 11) * (1.0 / 9007199254740992.0)

    def integer(self, i: int, bounds: tuple[int, int]) -> int:
        low, high = bounds
        return low + min(high - low, int(self.uniform(i) * (high - low + 1)))

    def real(self, i: int, bounds: tuple[float, float]) -> float:
        low, high = bounds
        return low + (high - low) * self.uniform(i)

    def choice(self, i: int, n: int) -> int:
        return min(n - 1, int(self.uniform(i) * n))

    def blend(self, i: int, corners: tuple[tuple[float, ...], ...]) -> tuple[float, ...]:
        """A point of the simplex spanned by ``corners``: weights ~ flat Dirichlet (normalised
        exponentials), so every mix between the corners can be drawn and nothing outside them."""
        if len(corners) == 1:
            return corners[0]
        w = [-math.log(1.0 - self.uniform(i, k)) for k in range(len(corners))]
        total = sum(w)
        mix = [sum(wk * c[n] for wk, c in zip(w, corners)) / total for n in range(len(corners[0]))]
        s = sum(mix)
        return tuple(round(p / s, 12) for p in mix)


def _as_bounds(owner: str, name: str, value: Any, kind: type) -> tuple:
    try:
        low, high = value
    except (TypeError, ValueError):
        raise ValueError(f"{owner}.{name} must be a (low, high) pair, got {value!r}") from None
    for v in (low, high):
        if kind is int and (not isinstance(v, int) or isinstance(v, bool)):
            raise ValueError(f"{owner}.{name} must hold ints, got {value!r}")
        if kind is float and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise ValueError(f"{owner}.{name} must hold finite numbers, got {value!r}")
    if high < low:
        raise ValueError(f"{owner}.{name} must have low <= high, got {value!r}")
    return (kind(low), kind(high))


def _as_corners(owner: str, name: str, value: object, size: int) -> tuple[tuple[float, ...], ...]:
    if not isinstance(value, (tuple, list)) or not value:
        raise ValueError(f"{owner}.{name} must be a non-empty sequence of mixes, got {value!r}")
    corners = tuple(_as_mix(owner, name, c) for c in value)
    for c in corners:
        _check_mix(owner, name, c, size)
    return corners


@dataclass(frozen=True)
class ScenarioDistribution:
    """A family of ED days: each episode's :class:`Scenario` is drawn from the episode's seed.

    Every field is a range (``(low, high)``, inclusive, drawn uniformly), a probability, or a
    tuple of *corner* mixes (the drawn mix is a random convex combination of the corners:
    one corner = that mix exactly). :meth:`sample` is a function of the seed only, drawn from its
    own stream of the counter-based generator, so the day's draws (arrivals, dynamics) are those
    of the drawn scenario with the same seed, and every policy meets the same hospital and the
    same patients (common random numbers).

    Sizes are bounded by the action table and the state (SPEC §3): at most 32 general beds
    (addressed through the sorted board), 5 ICU beds (the bed manager's ``discharge ICU bed
    [j]`` actions) and 3 ventilators. The background rate scales with size:
    ``arrival_rate = arrival_per_bed * general_beds``. A resource shock takes
    ``ventilator_shock`` ventilators out of service for the whole day; an outage (probability
    ``outage_probability``) takes ``outage_ventilators`` more out for part of it (an
    :class:`Outage`: from a tick in ``outage_start`` for ``outage_length`` ticks). Neither
    ever takes the last one. Staffing: treatment
    advances at ``night_service`` speed (drawn) from 22:00 to 07:00 and at full speed by day
    (tick 0 = midnight; the drawn scenario's ``service_profile``, by hour).
    """

    name: str
    description: str = ""
    general_beds: tuple[int, int] = (12, 20)
    icu_beds: tuple[int, int] = (3, 5)
    ventilators: tuple[int, int] = (2, 3)
    arrival_per_bed: tuple[float, float] = (0.035, 0.05)
    amplitude: tuple[float, float] = (0.1, 0.4)
    peak: tuple[float, float] = (25.0, 50.0)
    severity_mixes: tuple[tuple[float, ...], ...] = ((0.12, 0.34, 0.39, 0.12, 0.03),)
    condition_mixes: tuple[tuple[float, ...], ...] = ((0.22, 0.20, 0.22, 0.22, 0.14),)
    burst_probability: float = 0.0
    burst_start: tuple[int, int] = (20, 60)
    burst_length: tuple[int, int] = (2, 5)
    burst_rate: tuple[float, float] = (2.0, 5.0)
    burst_conditions: tuple[int, ...] = (3,)
    burst_severity_mixes: tuple[tuple[float, ...], ...] = ((0.0, 0.0, 0.2, 0.5, 0.3),)
    shock_probability: float = 0.0
    ventilator_shock: tuple[int, int] = (1, 1)
    outage_probability: float = 0.0
    outage_start: tuple[int, int] = (20, 60)
    outage_length: tuple[int, int] = (10, 30)
    outage_ventilators: tuple[int, int] = (1, 1)
    night_service: tuple[float, float] = (1.0, 1.0)
    episode_length: int = 100
    max_deaths: int = 40

    def __post_init__(self) -> None:
        own = "ScenarioDistribution"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"{own}.name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.description, str):
            raise ValueError(f"{own}.description must be a string, got {self.description!r}")
        for name, kind in (
            ("general_beds", int),
            ("icu_beds", int),
            ("ventilators", int),
            ("burst_start", int),
            ("burst_length", int),
            ("ventilator_shock", int),
            ("outage_start", int),
            ("outage_length", int),
            ("outage_ventilators", int),
            ("arrival_per_bed", float),
            ("amplitude", float),
            ("peak", float),
            ("burst_rate", float),
            ("night_service", float),
        ):
            object.__setattr__(self, name, _as_bounds(own, name, getattr(self, name), kind))
        if not 0.0 < self.night_service[0] <= self.night_service[1] <= 1.0:
            raise ValueError(f"{own}.night_service must lie in (0, 1], got {self.night_service}")
        size_bounds = (
            ("general_beds", 1, MAX_GENERAL_BEDS),
            ("icu_beds", 1, MAX_ICU_BEDS),
            ("ventilators", 1, MAX_VENTILATORS),
        )
        for name, low, high in size_bounds:
            lo, hi = getattr(self, name)
            if lo < low or hi > high:
                raise ValueError(
                    f"{own}.{name} must lie in [{low}, {high}] (the action layout), got {(lo, hi)}"
                )
        _check_int(own, "episode_length", self.episode_length, 1, 10_000)
        _check_int(own, "max_deaths", self.max_deaths, 1, 1_000_000)
        if self.arrival_per_bed[0] < 0:
            raise ValueError(f"{own}.arrival_per_bed must be >= 0, got {self.arrival_per_bed}")
        if self.amplitude[0] < 0 or self.amplitude[1] > 1:
            raise ValueError(f"{own}.amplitude must lie in [0, 1], got {self.amplitude}")
        if self.burst_rate[0] < 0:
            raise ValueError(f"{own}.burst_rate must be >= 0, got {self.burst_rate}")
        if self.burst_start[0] < 0 or self.burst_length[0] < 1:
            raise ValueError(f"{own}.burst_start must be >= 0 and burst_length >= 1")
        if self.ventilator_shock[0] < 0:
            raise ValueError(f"{own}.ventilator_shock must be >= 0, got {self.ventilator_shock}")
        _check_real(own, "burst_probability", self.burst_probability, 0.0, 1.0)
        _check_real(own, "shock_probability", self.shock_probability, 0.0, 1.0)
        _check_real(own, "outage_probability", self.outage_probability, 0.0, 1.0)
        if self.outage_start[0] < 0 or self.outage_length[0] < 1 or self.outage_ventilators[0] < 1:
            raise ValueError(
                f"{own}.outage_start must be >= 0, outage_length and outage_ventilators >= 1, got "
                f"{self.outage_start}, {self.outage_length}, {self.outage_ventilators}"
            )
        sizes = {"severity_mixes": N_SEVERITIES, "condition_mixes": len(CONDITIONS)}
        sizes["burst_severity_mixes"] = N_SEVERITIES
        for name, size in sizes.items():
            object.__setattr__(self, name, _as_corners(own, name, getattr(self, name), size))
        conditions = (
            tuple(self.burst_conditions) if isinstance(self.burst_conditions, (tuple, list)) else None
        )
        if not conditions:
            raise ValueError(f"{own}.burst_conditions must be a non-empty sequence of condition ids")
        for c in conditions:
            _check_int(own, "burst_conditions", c, 1, len(CONDITIONS))
        object.__setattr__(self, "burst_conditions", conditions)

    def sample(self, seed: int) -> Scenario:
        """The scenario of episode seed ``seed`` (a function of the seed only)."""
        if isinstance(seed, bool) or not hasattr(seed, "__index__") or int(seed) < 0:
            raise ValueError(f"a seed must be a non-negative int, got {seed!r}")
        d = _Draws(int(seed), self.name)
        general = d.integer(0, self.general_beds)
        icu = d.integer(1, self.icu_beds)
        vents = d.integer(2, self.ventilators)
        shock = 0
        if d.uniform(3) < self.shock_probability:
            shock = min(vents - 1, d.integer(4, self.ventilator_shock))
        burst = None
        if d.uniform(10) < self.burst_probability:
            start = d.integer(11, self.burst_start)
            burst = Burst(
                start=start,
                end=start + d.integer(12, self.burst_length) - 1,
                rate=round(d.real(13, self.burst_rate), 6),
                condition=self.burst_conditions[d.choice(14, len(self.burst_conditions))],
                severity_mix=d.blend(15, self.burst_severity_mixes),
            )
        night = round(d.real(16, self.night_service), 6)
        service = tuple(night if h < NIGHT_END_HOUR or h >= NIGHT_START_HOUR else 1.0 for h in range(24))
        outage = None
        if self.outage_probability and d.uniform(17) < self.outage_probability:
            out = min(vents - shock - 1, 2, d.integer(18, self.outage_ventilators))
            if out > 0:  # never the last ventilator in service
                start = d.integer(19, self.outage_start)
                outage = Outage(start, start + d.integer(20, self.outage_length) - 1, out)
        tag = f"{general}g{icu}i{vents - shock}v" + (f" (shock -{shock})" if shock else "")
        if outage is not None:
            tag += f" (-{outage.ventilators} vent ticks {outage.start}-{outage.end})"
        return Scenario(
            name=f"{self.name}:{seed}",
            description=f"{self.name} draw: {tag}" + (", burst" if burst else ""),
            general_beds=general,
            icu_beds=icu,
            ventilators=vents - shock,
            episode_length=self.episode_length,
            max_deaths=self.max_deaths,
            arrival_rate=round(d.real(5, self.arrival_per_bed) * general, 6),
            amplitude=round(d.real(6, self.amplitude), 6),
            peak=round(d.real(7, self.peak), 6),
            severity_mix=d.blend(8, self.severity_mixes),
            condition_mix=d.blend(9, self.condition_mixes),
            burst=burst,
            service_profile=service if night < 1.0 else (),
            outage=outage,
        )

    def with_overrides(self, **changes: object) -> ScenarioDistribution:
        """A validated copy with some fields changed."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise ValueError(f"unknown ScenarioDistribution field(s): {sorted(unknown)}")
        return replace(self, **changes)  # type: ignore[arg-type]


def register_distribution(
    distribution: ScenarioDistribution, *, overwrite: bool = False
) -> ScenarioDistribution:
    """Add a distribution to the registry so ``scenario="name"`` selects it."""
    if not isinstance(distribution, ScenarioDistribution):
        raise ValueError(
            f"register_distribution expects a ScenarioDistribution, got {type(distribution).__name__}"
        )
    name = distribution.name
    if name in SCENARIOS or (name in DISTRIBUTIONS and not overwrite):
        raise ValueError(f"{name!r} is already registered (pass overwrite=True to replace a distribution)")
    DISTRIBUTIONS[name] = distribution
    return distribution


def resolve_scenario(
    scenario: str | Scenario | ScenarioDistribution | Mapping[str, object] | None,
) -> Scenario | ScenarioDistribution:
    """A scenario or a distribution: a registered name of either, or the value itself."""
    if isinstance(scenario, ScenarioDistribution):
        return scenario
    if isinstance(scenario, str) and scenario in DISTRIBUTIONS:
        return DISTRIBUTIONS[scenario]
    return get_scenario(scenario)


# The generalisation split (docs/generalisation.md). ``validation`` has train's ranges under its
# own name, hence its own draws (in-distribution, unseen days and hospitals); ``test`` reaches
# outside train's ranges: smaller and larger departments, night and evening peaks, a sharper
# daily swing, heavier load, respiratory and infection bursts, two-ventilator shocks and mid-day
# ventilator outages (train has none).
_SURGE_SEVERITY = (0.05, 0.20, 0.35, 0.25, 0.15)
_RESPIRATORY_HEAVY = (0.12, 0.50, 0.10, 0.18, 0.10)
_TRAIN = {
    "general_beds": (12, 18),
    "icu_beds": (3, 4),
    "ventilators": (2, 3),
    "arrival_per_bed": (0.035, 0.055),
    "amplitude": (0.1, 0.35),
    "peak": (25.0, 50.0),
    "severity_mixes": (_NORMAL_SEVERITY, _SURGE_SEVERITY),
    "condition_mixes": (_NORMAL_CONDITIONS, _RESPIRATORY_HEAVY),
    "burst_probability": 0.3,
    "burst_start": (20, 60),
    "burst_length": (2, 4),
    "burst_rate": (2.0, 4.0),
    "burst_conditions": (condition_id_of("trauma"), condition_id_of("cardiac")),
    "shock_probability": 0.2,
    "ventilator_shock": (1, 1),
    "night_service": (0.75, 1.0),
}
for _d in (
    ScenarioDistribution(
        name="train",
        description="training hospitals: 12-18 general beds, day peaks, trauma/cardiac bursts, "
        "1-ventilator shocks",
        **_TRAIN,  # type: ignore[arg-type]
    ),
    ScenarioDistribution(
        name="validation",
        description="train's ranges, its own draws: in-distribution evaluation",
        **_TRAIN,  # type: ignore[arg-type]
    ),
    ScenarioDistribution(
        name="test",
        description="out of distribution: 8-30 general beds, 2-5 ICU, night/evening peaks, heavier load, "
        "respiratory/infection bursts, 1-2 ventilator shocks, mid-day ventilator outages, thinner night "
        "staffing",
        general_beds=(8, 30),
        icu_beds=(2, 5),
        ventilators=(1, 3),
        arrival_per_bed=(0.045, 0.07),
        amplitude=(0.3, 0.6),
        peak=(55.0, 95.0),
        severity_mixes=(_NORMAL_SEVERITY, _SURGE_SEVERITY, (0.05, 0.20, 0.45, 0.20, 0.10)),
        condition_mixes=(_NORMAL_CONDITIONS, _RESPIRATORY_HEAVY, (0.10, 0.25, 0.10, 0.45, 0.10)),
        burst_probability=0.5,
        burst_start=(10, 80),
        burst_length=(3, 6),
        burst_rate=(2.0, 5.0),
        burst_conditions=(condition_id_of("respiratory"), condition_id_of("infection")),
        burst_severity_mixes=((0.0, 0.1, 0.4, 0.3, 0.2), (0.0, 0.0, 0.2, 0.5, 0.3)),
        shock_probability=0.5,
        ventilator_shock=(1, 2),
        outage_probability=0.4,  # unseen in train: ventilators lost for part of the day
        outage_start=(10, 70),
        outage_length=(10, 40),
        outage_ventilators=(1, 2),
        night_service=(0.5, 0.75),
    ),
):
    register_distribution(_d)

SPLITS: tuple[str, ...] = ("train", "validation", "test")
"""The generalisation protocol's distributions (train on the first, grade on the other two)."""


CLOCK_START_HOUR = 0.0
"""The ``calibrated`` distribution's clock: tick 0 is midnight (a tick is 24 h / episode_length)."""
CALIBRATED_SEVERITY = (0.10, 0.32, 0.45, 0.12, 0.01)
"""Severity 1..5 = ESI 5..1 (SPEC §2: s = 6 - ESI). ESI 1..5 = 1 %, 12 %, 45 %, 32 %, 10 %: the
US national ED survey's triage mix with unknown levels left out, rounded (docs/calibration.md)."""
CALIBRATED_PEAK_HOURS = (11.0, 13.0)
"""Hour of peak arrivals (late morning to early afternoon; docs/calibration.md)."""
CALIBRATED_AMPLITUDE = (0.5, 0.6)
"""Peak / trough ratio (1 + a) / (1 - a) = 3 to 4 (docs/calibration.md)."""

register_distribution(
    ScenarioDistribution(
        name="calibrated",
        description="days matched to published ED figures (docs/calibration.md): triage mix, hourly "
        "arrival profile with tick 0 at midnight",
        general_beds=(20, 20),
        icu_beds=(5, 5),
        ventilators=(3, 3),
        arrival_per_bed=(0.0425, 0.0425),
        amplitude=CALIBRATED_AMPLITUDE,
        peak=(CALIBRATED_PEAK_HOURS[0] / 24 * 100, CALIBRATED_PEAK_HOURS[1] / 24 * 100),
        severity_mixes=(CALIBRATED_SEVERITY,),
        condition_mixes=(_NORMAL_CONDITIONS,),
    )
)
