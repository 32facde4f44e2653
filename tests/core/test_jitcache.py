"""The kernel is split across files, and numba's cache checks only a function's own file:
jitcache must notice an edit to any kernel source (a callee or a constant compiled in)."""

from __future__ import annotations

from pathlib import Path

from hospital_marl.core import jitcache, kernel
from hospital_marl.core.kernel import batch, dynamics, fused, observe, rules


def test_every_kernel_file_is_a_digested_source() -> None:
    files = {m.__name__ for m in (kernel.common, rules, dynamics, observe, fused, batch)}
    assert files <= set(kernel.SOURCES)
    assert {"hospital_marl.core.rng", "hospital_marl.core.types"} <= set(kernel.SOURCES)


def test_the_digest_changes_with_any_source(tmp_path, monkeypatch) -> None:
    before = jitcache.sources_digest(kernel.SOURCES)
    assert before == jitcache.sources_digest(kernel.SOURCES)
    edited = tmp_path / "rules.py"
    edited.write_bytes(Path(rules.__file__).read_bytes() + b"\n# an edit\n")
    monkeypatch.setattr(rules, "__file__", str(edited))
    assert jitcache.sources_digest(kernel.SOURCES) != before


def test_check_cache__empties_every_kernel_function_cache_when_a_source_changes(monkeypatch) -> None:
    funcs = jitcache.dispatchers(rules, dynamics, observe, fused, batch)
    assert kernel.tick in funcs and kernel.needs_ventilator in funcs and kernel.step_joint_batch in funcs
    flushed: list[object] = []
    for dispatcher in funcs:
        cache = dispatcher._cache
        monkeypatch.setattr(cache, "flush", lambda c=cache: flushed.append(c))  # record, flush nothing
    args = (funcs, "kernel.sources", kernel.SOURCES)
    assert jitcache.check_cache(*args) is False  # compiled from these sources (checked at import)
    assert jitcache.check_cache(*args, digest="other sources") is True
    assert len(flushed) == len(funcs)
    assert jitcache.check_cache(*args) is True  # back to these sources: emptied again
    assert jitcache.check_cache(*args) is False
