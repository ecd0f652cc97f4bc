"""Package fronts that load a name's module on first use.

A package file that imports every module it re-exports makes each of its leaf modules
pay for all of them (``import personae.context.budget`` would load the whole context
engine). A lazy front keeps ``from personae.context import Snapshot`` working while a
leaf import loads only what the leaf itself imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_front"]


def lazy_front(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``homes`` maps each exported name to the
    module defining it; the value is imported on first access and kept in the package."""

    def __getattr__(name: str) -> Any:  # noqa: N807 (the module hook's own name)
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
