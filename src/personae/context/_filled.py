"""Frozen dataclasses built by filling their ``__dict__`` (results are built per
section per assembly: their ``__init__`` sets each field through
``object.__setattr__``, several times the cost)."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["filled"]

T = TypeVar("T")


def filled(cls: type[T], **fields: Any) -> T:
    """An instance of the frozen dataclass ``cls`` with ``fields`` (every field, each
    named). ``cls`` must have no ``__post_init__`` and no slots."""
    got: T = object.__new__(cls)
    got.__dict__.update(fields)
    return got
