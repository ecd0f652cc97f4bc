"""Where a run sits in a tree of runs across processes, and the budget it inherits.

A run that starts another process (a handover child, a chain step, a batch task)
passes three things down, in the child's environment and in the handover file:

- ``PERSONAE_PARENT_RUN``: the parent run's id, so the child's run row links to it;
- ``TRACEPARENT``: a W3C trace context (``00-<trace id>-<parent span id>-01``), so
  the child's OpenTelemetry spans join the parent's trace under the parent's span;
- ``PERSONAE_BUDGET``: what is left of the tree's caps (tokens, cost, calls) as JSON;
  the child's own caps are the tighter of these and its flags, so it cannot raise them.

:func:`running` marks the run this process is running (a context variable, so runs
side by side in one process keep apart); :func:`child_environment` writes the three
variables for a child of that run, and :func:`inherited` reads them in the child.
This module imports nothing of personae (every layer may use it).

>>> trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
>>> parse_traceparent(traceparent(trace, span)) == (trace, span)
True
>>> Budget(tokens=1000, calls=5).tighter(Budget(tokens=400, cost=0.5))
Budget(tokens=400, cost=0.5, calls=5)
>>> Budget(tokens=1000, calls=5).left_after(tokens=300, cost=None, calls=5)
Budget(tokens=700, cost=None, calls=0)
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import os
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

__all__ = [
    "BUDGET_ENV",
    "PARENT_RUN_ENV",
    "TRACEPARENT_ENV",
    "Budget",
    "Link",
    "Running",
    "Spent",
    "child_environment",
    "current",
    "inherited",
    "new_span_id",
    "new_trace_id",
    "parse_traceparent",
    "running",
    "traceparent",
]

PARENT_RUN_ENV = "PERSONAE_PARENT_RUN"
"""Environment variable holding the parent run's id."""
TRACEPARENT_ENV = "TRACEPARENT"
"""Environment variable holding the W3C trace context (``traceparent`` header value)."""
BUDGET_ENV = "PERSONAE_BUDGET"
"""Environment variable holding what is left of the tree's caps (JSON)."""

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def new_trace_id() -> str:
    """A fresh W3C trace id (32 hex digits, never all zero)."""
    return secrets.token_hex(16)


def new_span_id() -> str:
    """A fresh W3C span id (16 hex digits)."""
    return secrets.token_hex(8)


def traceparent(trace_id: str, span_id: str) -> str:
    """The ``traceparent`` value naming span ``span_id`` of trace ``trace_id`` (sampled)."""
    return f"00-{trace_id}-{span_id}-01"


def parse_traceparent(text: str | None) -> tuple[str, str] | None:
    """``(trace id, parent span id)`` of a ``traceparent`` value; ``None`` when it is absent
    or invalid (the W3C rule: an invalid value is ignored and a new trace starts)."""
    match = _TRACEPARENT.match((text or "").strip().lower())
    if match is None or set(match.group(1)) == {"0"} or set(match.group(2)) == {"0"}:
        return None
    return match.group(1), match.group(2)


_N = TypeVar("_N", int, float)


def _tighter(a: _N | None, b: _N | None) -> _N | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


@dataclass(frozen=True, kw_only=True)
class Budget:
    """Caps on a tree of runs: total tokens, cost and model calls; ``None``: no cap."""

    tokens: int | None = None
    """Most tokens (input plus output, as the provider reported them)."""
    cost: float | None = None
    """Most cost, in the currency of the project's price table."""
    calls: int | None = None
    """Most model calls (requests)."""

    @property
    def empty(self) -> bool:
        """No cap at all."""
        return self.tokens is None and self.cost is None and self.calls is None

    def tighter(self, other: Budget) -> Budget:
        """Each cap the smaller of the two (a child cannot raise what it inherits)."""
        return Budget(
            tokens=_tighter(self.tokens, other.tokens),
            cost=_tighter(self.cost, other.cost),
            calls=_tighter(self.calls, other.calls),
        )

    def left_after(self, *, tokens: int, cost: float | None, calls: int) -> Budget:
        """What is left once ``tokens``, ``cost`` and ``calls`` are spent (never below 0).

        An unknown ``cost`` (a model without a price) leaves the cost cap as it is."""
        return Budget(
            tokens=None if self.tokens is None else max(0, self.tokens - tokens),
            cost=(
                None if self.cost is None
                else self.cost if cost is None else max(0.0, round(self.cost - cost, 9))
            ),
            calls=None if self.calls is None else max(0, self.calls - calls),
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        """The caps that are set, as JSON-safe values."""
        out: dict[str, Any] = {}
        for key in ("tokens", "cost", "calls"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def parse(cls, data: Any, *, source: str) -> Budget:
        """A budget from JSON-like ``data`` (``{"tokens": 1000, "cost": 0.5, "calls": 20}``).

        Raises ``ValueError`` with one line naming ``source`` and the field."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ValueError(f'{source}: must be an object like {{"tokens": 1000}}')
        unknown = sorted(set(data) - {"tokens", "cost", "calls"})
        if unknown:
            raise ValueError(f"{source}: unknown field {unknown[0]!r} (known: tokens, cost, calls)")
        values: dict[str, Any] = {}
        for key in ("tokens", "calls"):
            value = data.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):  # fmt: skip
                raise ValueError(f"{source}: {key} must be a whole number >= 0, not {value!r}")
            values[key] = value
        cost = data.get("cost")
        if cost is not None and (
            isinstance(cost, bool) or not isinstance(cost, int | float)
            or not math.isfinite(cost) or cost < 0
        ):  # fmt: skip
            raise ValueError(f"{source}: cost must be a number >= 0, not {cost!r}")
        return cls(tokens=values["tokens"], cost=None if cost is None else float(cost),
                   calls=values["calls"])  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Link:
    """How a run links to the run that started it (all empty for a run a user started)."""

    parent_run: str | None = None
    """The parent run's id."""
    trace_id: str | None = None
    """The trace the run joins (``None``: it starts its own)."""
    parent_span: str | None = None
    """The span the run's spans go under (the parent run's span)."""
    budget: Budget = field(default_factory=Budget)
    """What is left of the tree's caps for this run and its children."""

    def merged(self, other: Link) -> Link:
        """This link, with what it lacks taken from ``other``; the tighter budget of both."""
        return Link(
            parent_run=self.parent_run or other.parent_run,
            trace_id=self.trace_id or other.trace_id,
            parent_span=self.parent_span if self.trace_id else other.parent_span,
            budget=self.budget.tighter(other.budget),
        )

    def as_wire(self) -> dict[str, Any]:
        """The link as the handover file's ``lineage`` object (camelCase, set fields only)."""
        out: dict[str, Any] = {}
        if self.parent_run:
            out["parentRun"] = self.parent_run
        if self.trace_id and self.parent_span:
            out["traceparent"] = traceparent(self.trace_id, self.parent_span)
        if not self.budget.empty:
            out["budget"] = self.budget.as_dict()
        return out

    @classmethod
    def from_wire(cls, data: Mapping[str, Any] | None, *, source: str) -> Link:
        """A link from the handover file's ``lineage`` object (``ValueError`` when bad)."""
        if not data:
            return cls()
        parent = data.get("parentRun")
        if parent is not None and (not isinstance(parent, str) or not _RUN_ID.match(parent)):
            raise ValueError(f"{source}.parentRun: not a run id: {str(parent)[:40]!r}")
        trace = parse_traceparent(data.get("traceparent"))
        budget = Budget.parse(data.get("budget"), source=f"{source}.budget")
        return cls(
            parent_run=parent, trace_id=trace[0] if trace else None,
            parent_span=trace[1] if trace else None, budget=budget,
        )  # fmt: skip


def inherited(env: Mapping[str, str] | None = None) -> Link:
    """The link this process was started with (``PERSONAE_PARENT_RUN``, ``TRACEPARENT``,
    ``PERSONAE_BUDGET``); raises ``ValueError`` naming the variable when one is malformed
    (an invalid ``TRACEPARENT`` is ignored, as W3C says)."""
    environ = os.environ if env is None else env
    parent = environ.get(PARENT_RUN_ENV, "").strip() or None
    if parent is not None and not _RUN_ID.match(parent):
        raise ValueError(f"{PARENT_RUN_ENV}: not a run id: {parent[:40]!r}")
    trace = parse_traceparent(environ.get(TRACEPARENT_ENV))
    raw = environ.get(BUDGET_ENV, "").strip()
    try:
        data = json.loads(raw) if raw else None
    except json.JSONDecodeError:
        raise ValueError(f"{BUDGET_ENV}: not JSON: {raw[:40]!r}") from None
    return Link(
        parent_run=parent, trace_id=trace[0] if trace else None,
        parent_span=trace[1] if trace else None, budget=Budget.parse(data, source=BUDGET_ENV),
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Running:
    """The run this process is running, as its children see it."""

    run_id: str
    """Its id (the children's parent run)."""
    trace_id: str
    """Its trace."""
    span_id: str
    """Its own span (the children's parent span)."""
    budget_left: Callable[[], Budget] = Budget
    """What is left of its caps right now (asked when a child starts)."""

    def link(self) -> Link:
        """The link a child of this run gets."""
        return Link(
            parent_run=self.run_id, trace_id=self.trace_id, parent_span=self.span_id,
            budget=self.budget_left(),
        )  # fmt: skip


_CURRENT: contextvars.ContextVar[Running | None] = contextvars.ContextVar(
    "personae_running", default=None
)


_PROCESS: list[Running] = []
"""The run a whole process runs (a chain or batch command: its worker threads start the
children and do not share a context), innermost last."""


def current() -> Running | None:
    """The run this task or thread's context is running, else the one this process runs."""
    run = _CURRENT.get()
    if run is None and _PROCESS:
        return _PROCESS[-1]
    return run


@contextlib.contextmanager
def running(run: Running, *, process_wide: bool = False) -> Iterator[Running]:
    """Mark ``run`` as the running one for the block (children started in it link to it);
    ``process_wide`` also for every thread of the process (a chain or batch command)."""
    token = _CURRENT.set(run)
    if process_wide:
        _PROCESS.append(run)
    try:
        yield run
    finally:
        _CURRENT.reset(token)
        if process_wide:
            _PROCESS.remove(run)


def child_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the link for a child of the running run written in (changed in place,
    returned). Outside a run (a chain or batch command without a run of its own), what
    this process inherited passes through unchanged."""
    run = current()
    if run is None:
        return env
    link = run.link()
    env[PARENT_RUN_ENV] = run.run_id
    env[TRACEPARENT_ENV] = traceparent(run.trace_id, run.span_id)
    if link.budget.empty:
        env.pop(BUDGET_ENV, None)
    else:
        env[BUDGET_ENV] = json.dumps(link.budget.as_dict())
    return env


class Spent(NamedTuple):
    """Usage summed over runs: model calls, tokens (input plus output) and cost."""

    calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    """What the priced calls cost."""
    unpriced: tuple[str, ...] = ()
    """Models called without a price (their cost is unknown)."""

    def __add__(self, other: tuple[Any, ...]) -> Spent:  # type: ignore[override]
        o = Spent(*other)
        return Spent(self.calls + o.calls, self.tokens + o.tokens, round(self.cost + o.cost, 9),
                     tuple(dict.fromkeys((*self.unpriced, *o.unpriced))))  # fmt: skip
