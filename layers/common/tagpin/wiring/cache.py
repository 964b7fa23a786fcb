"""The registry of the composition root's cached factories: ``cached`` makes one (``functools.cache``)
and records it, so ``tagpin.wiring.reset`` clears every one, not a hand-kept list of them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

_FACTORIES: list[functools._lru_cache_wrapper[Any]] = []


def cached[T](factory: Callable[..., T]) -> functools._lru_cache_wrapper[T]:
    """``factory``'s answer, built once per container (per arguments) until ``reset``."""
    wrapped = functools.cache(factory)
    _FACTORIES.append(wrapped)
    return wrapped


def factories() -> tuple[functools._lru_cache_wrapper[Any], ...]:
    """Every cached factory, in the order they were made."""
    return tuple(_FACTORIES)
