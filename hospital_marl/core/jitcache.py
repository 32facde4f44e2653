"""Keeping numba's on-disk cache honest across files.

numba's ``cache=True`` checks only the source file that defines a function, but a compiled
function carries its callees' code and the module constants it read. When a callee or a
constant lives in another file, an edit there (or a merge, or a checkout) would leave the
cached caller running the old code. :func:`check_cache` records a digest of every source a
group of functions compiles in, next to their cache, and empties that cache when the digest
changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any


def sources_digest(modules: Iterable[str]) -> str:
    """A digest of the named modules' source files."""
    digest = hashlib.blake2b(digest_size=16)
    for name in modules:
        digest.update(Path(importlib.import_module(name).__file__ or "").read_bytes())
    return digest.hexdigest()


def dispatchers(*modules: ModuleType) -> tuple[Any, ...]:
    """Every numba dispatcher defined in ``modules`` (not those they import)."""
    return tuple(
        obj
        for module in modules
        for obj in vars(module).values()
        if hasattr(obj, "py_func") and getattr(obj.py_func, "__module__", None) == module.__name__
    )


def check_cache(funcs: Iterable[Any], stamp: str, modules: Iterable[str], digest: str | None = None) -> bool:
    """Empty ``funcs``' numba cache when it was compiled from other sources than ``modules``
    now hold (or than ``digest``, if given); record the current ones in a file named
    ``stamp`` beside the cache. Returns whether it was emptied. Best effort: a cache
    directory that cannot be written is left to numba."""
    digest = digest or sources_digest(modules)
    caches = [getattr(f, "_cache", None) for f in funcs]
    paths = {c.cache_path for c in caches if c is not None and hasattr(c, "cache_path")}
    stale = False
    for path in paths:
        file = Path(path) / stamp
        try:
            stale |= not file.is_file() or file.read_text() != digest
        except OSError:
            return False
    if stale:
        for cache in caches:
            if cache is not None:
                cache.flush()
        for path in paths:
            with contextlib.suppress(OSError):
                (Path(path) / stamp).write_text(digest)
    return stale
