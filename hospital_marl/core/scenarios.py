"""Scenarios: frozen data in one registry.

A scenario is a value, not a subclass. Users define their own by building a
:class:`Scenario` (validated on construction) and optionally registering it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace

from hospital_marl.core.constants import CONDITIONS, N_SEVERITIES


def _as_mix(owner: str, name: str, mix: object) -> tuple[float, ...]:
    try:
        return tuple(float(p) for p in mix)  # type: ignore[union-attr]
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity_mix", _as_mix("Scenario", "severity_mix", self.severity_mix))
        object.__setattr__(self, "condition_mix", _as_mix("Scenario", "condition_mix", self.condition_mix))
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Scenario.name must be a non-empty string, got {self.name!r}")
        # The observation layout is fixed (the original's shapes): 20 general
        # beds, 5 ICU beds and 3 ventilators are the maxima it can show.
        for name, low, high in (
            ("general_beds", 1, 20),
            ("icu_beds", 1, 5),
            ("ventilators", 1, 3),
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

    def arrival_rates(self) -> list[float]:
        """λ(t) for t = 0 .. episode_length-1 (without the burst)."""
        n = self.episode_length
        return [
            self.arrival_rate * (1 + self.amplitude * math.cos(2 * math.pi * (t - self.peak) / n))
            for t in range(n)
        ]

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


def register_scenario(scenario: Scenario, *, overwrite: bool = False) -> Scenario:
    """Add a user-defined scenario to the registry so it is selectable by name."""
    if not isinstance(scenario, Scenario):
        raise ValueError(f"register_scenario expects a Scenario, got {type(scenario).__name__}")
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
            spec["burst"] = Burst(**burst)  # type: ignore[arg-type]
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
    "SCENARIOS",
    "Burst",
    "Scenario",
    "get_scenario",
    "register_scenario",
    "scenario_names",
]
