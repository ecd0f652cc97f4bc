"""A run's place in its tree of runs across processes: its link, its caps, its children's usage.

A run started by another run (a handover child, a chain step, a batch task) gets its
parent's id, trace and what is left of the tree's caps through the environment and the
handover file (:mod:`personae.lineage`). :func:`link_run` records that on the run's row;
:func:`tree_caps` makes the run's caps the tighter of its flags, the project's
``limits:`` and what it inherited (a child cannot raise them); :func:`child_usage` reads
what the runs it started in other processes used, so that the whole tree shares one cap.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from personae.errors import UsageError
from personae.lineage import Budget, Link, Running, Spent, new_span_id, new_trace_id
from personae.pricing import PriceTable, TreeCost
from personae.project import LimitsConfig
from personae.store.runs import RunStore

__all__ = ["check_cost_cap", "child_usage", "link_run", "tree_caps"]


def tree_caps(asked: Budget, config: LimitsConfig, inherited: Budget) -> Budget:
    """The caps a run runs under: its flags (``asked``), else the config's ``limits:``,
    then the tighter of those and what it ``inherited`` from its parent run."""
    own = Budget(
        tokens=asked.tokens if asked.tokens is not None else config.max_tokens_total,
        cost=asked.cost if asked.cost is not None else config.max_cost,
        calls=asked.calls if asked.calls is not None else config.max_requests,
    )
    return own.tighter(inherited)


def check_cost_cap(prices: PriceTable, model: str | None, cap: float | None, *, field: str) -> None:
    """Refuse a cost cap on a model without a price (its cost would be a guess): a
    :class:`~personae.errors.UsageError` naming ``field`` and where to add the price."""
    if cap is None:
        return
    if not (cap > 0 and math.isfinite(cap)):
        raise UsageError(f"{field} must be a number above zero (got {cap})", field=field)
    if model is not None and prices.price_for(model) is None:
        raise UsageError(
            f"{field} needs a price for {model}: add it under prices: in .personae/config.yaml "
            f"(e.g. prices: {{{model!r}: {{input: 2.5, output: 10}}}}, per million tokens)",
            field=field,
        )


def link_run(runs: RunStore, run_id: str, link: Link, caps: Budget) -> Running:
    """Record ``run_id``'s place in its tree (parent run, trace, its own span, caps) and
    return it as the running run its children link to."""
    trace = link.trace_id or new_trace_id()
    span = new_span_id()
    runs.link(
        run_id, trace_id=trace, span_id=span, parent_run_id=link.parent_run,
        parent_span_id=link.parent_span if link.trace_id else None,
        budget=caps.as_dict() or None,
    )  # fmt: skip
    return Running(run_id=run_id, trace_id=trace, span_id=span)


def child_usage(runs: RunStore, run_id: str, prices: PriceTable) -> Callable[[], Spent]:
    """What the runs below ``run_id`` (in other processes) have used so far, read from the
    store each time it is called (their model calls are stored as they are made)."""

    def read() -> Spent:
        below = [r.id for r in runs.descendants(run_id)]
        if not below:
            return Spent()
        calls = runs.call_usage(below)
        cost = TreeCost.of(prices, ((c.model, c.input_tokens, c.output_tokens) for c in calls))
        tokens = sum(c.input_tokens + c.output_tokens for c in calls)
        return Spent(len(calls), tokens, cost.priced, cost.unpriced)

    return read
