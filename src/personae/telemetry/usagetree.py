"""One usage tree across processes: a run, the runs it started, and what each used.

A run started by another run (a handover child, a chain step, a batch task) names its
parent run in the store (:attr:`~personae.store.runs.RunRecord.parent_run_id`). This
module reads a run and every run below it and sums, per run and per subtree: model
calls, tokens as the provider reported them and as personae counted them, time and
cost (by the project's price table; a model without a price makes the cost unknown,
never a guess). Sub-agents, which run inside their run's process, are shown as nodes of
their run. ``personae runs show RUN --tree``, the viewer and the OpenTelemetry export
read it. Pure reads; no OpenTelemetry import.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from personae.pricing import PriceTable, TreeCost
from personae.store.runs import CallUsage, RunRecord, RunStore
from personae.telemetry.runtree import parse_time

__all__ = ["AgentUsage", "Totals", "UsageNode", "render_tree", "usage_tree"]


@dataclass(frozen=True, kw_only=True)
class Totals:
    """What a set of model calls used."""

    calls: int = 0
    """Model calls."""
    input_tokens: int = 0
    """Input tokens the provider reported."""
    output_tokens: int = 0
    """Output tokens the provider reported."""
    counted_input_tokens: int = 0
    """Input tokens personae counted itself (whole requests; calls it did not count add 0)."""
    uncounted_calls: int = 0
    """Calls personae did not count (stored before it counted whole requests)."""
    cost: TreeCost = field(default_factory=TreeCost)
    """Their cost (``cost.total`` is ``None`` when a model had no price)."""

    @property
    def tokens(self) -> int:
        """Input plus output tokens, as reported (what the caps count)."""
        return self.input_tokens + self.output_tokens

    @classmethod
    def of(cls, calls: Iterable[CallUsage], prices: PriceTable) -> Totals:
        """The totals of ``calls``."""
        rows = list(calls)
        return cls(
            calls=len(rows),
            input_tokens=sum(c.input_tokens for c in rows),
            output_tokens=sum(c.output_tokens for c in rows),
            counted_input_tokens=sum(c.counted_input_tokens or 0 for c in rows),
            uncounted_calls=sum(1 for c in rows if c.counted_input_tokens is None),
            cost=TreeCost.of(prices, ((c.model, c.input_tokens, c.output_tokens) for c in rows)),
        )

    def __add__(self, other: Totals) -> Totals:
        return Totals(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            counted_input_tokens=self.counted_input_tokens + other.counted_input_tokens,
            uncounted_calls=self.uncounted_calls + other.uncounted_calls,
            cost=self.cost + other.cost,
        )

    def as_json(self) -> dict[str, Any]:
        """JSON-safe figures (``cost``: ``null`` when unknown, with ``unpriced_models``)."""
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tokens": self.tokens,
            "counted_input_tokens": self.counted_input_tokens,
            "uncounted_calls": self.uncounted_calls,
            "cost": self.cost.total,
            "priced_cost": self.cost.priced,
            "unpriced_models": list(self.cost.unpriced),
        }


@dataclass(frozen=True, kw_only=True)
class AgentUsage:
    """What the sub-agents of one persona used inside a run."""

    persona: str
    """The sub-agent's persona."""
    totals: Totals
    """Its model calls."""


@dataclass(kw_only=True)
class UsageNode:
    """One run of the tree: its own usage, its sub-agents', and the runs it started."""

    run: RunRecord
    """The stored run."""
    own: Totals
    """Its own model calls (its team and sub-agents)."""
    agents: list[AgentUsage] = field(default_factory=list)
    """Its sub-agents' share of :attr:`own`, by persona."""
    children: list[UsageNode] = field(default_factory=list)
    """Runs it started in other processes, oldest first."""

    @property
    def seconds(self) -> float | None:
        """Wall time from start to end (``None``: still running or unknown)."""
        start, end = parse_time(self.run.started_at), parse_time(self.run.finished_at)
        return None if start is None or end is None else round((end - start).total_seconds(), 3)

    @property
    def total(self) -> Totals:
        """This run and every run below it."""
        out = self.own
        for child in self.children:
            out = out + child.total
        return out

    def walk(self) -> list[UsageNode]:
        """This node and every node below it, depth first."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out

    def as_json(self) -> dict[str, Any]:
        """The tree as JSON (``runs show --tree --json``)."""
        r = self.run
        return {
            "run": r.id,
            "parent_run": r.parent_run_id,
            "status": r.status.value,
            "persona": r.persona,
            "model": r.model,
            "task": r.task,
            "started_at": r.started_at,
            "finished_at": r.finished_at,
            "seconds": self.seconds,
            "trace_id": r.trace_id,
            "span_id": r.span_id,
            "budget": r.budget,
            "own": self.own.as_json(),
            "total": self.total.as_json(),
            "subagents": [{"persona": a.persona, **a.totals.as_json()} for a in self.agents],
            "children": [c.as_json() for c in self.children],
        }


def usage_tree(runs: RunStore, run_id: str, prices: PriceTable | None = None) -> UsageNode:
    """The tree below run ``run_id`` (a unique prefix works) with its usage."""
    table = prices or PriceTable()
    root = runs.get(run_id)
    below = runs.descendants(root.id)
    by_run: dict[str, list[CallUsage]] = {}
    for call in runs.call_usage([root.id, *(r.id for r in below)]):
        by_run.setdefault(call.run_id, []).append(call)
    nodes = {r.id: _node(r, by_run.get(r.id, []), table) for r in (root, *below)}
    for record in below:
        parent = nodes.get(record.parent_run_id or "")
        if parent is not None:
            parent.children.append(nodes[record.id])
    return nodes[root.id]


def _node(record: RunRecord, calls: list[CallUsage], prices: PriceTable) -> UsageNode:
    agents: dict[str, list[CallUsage]] = {}
    for call in calls:
        if call.role == "subagent":
            agents.setdefault(call.persona or "?", []).append(call)
    return UsageNode(
        run=record,
        own=Totals.of(calls, prices),
        agents=[AgentUsage(persona=p, totals=Totals.of(c, prices)) for p, c in agents.items()],
    )


def _cost_text(totals: Totals) -> str:
    cost = totals.cost
    if not cost.unpriced:
        return f"cost {cost.priced:.6g}"
    known = f", {cost.priced:.6g} priced" if cost.priced else ""
    return f"cost unknown (no price for {', '.join(cost.unpriced)}{known})"


def _figures(totals: Totals) -> str:
    counted = f"{totals.counted_input_tokens:,}"
    if totals.uncounted_calls:
        counted += f" ({totals.uncounted_calls} call(s) not counted)"
    return (
        f"{totals.calls} call(s), tokens {totals.input_tokens:,} in / "
        f"{totals.output_tokens:,} out (provider; ours {counted} in), {_cost_text(totals)}"
    )


def render_tree(node: UsageNode) -> list[str]:
    """The tree as text lines (``runs show --tree``): each run with its own figures, its
    sub-agents, the runs it started, and the whole tree's total last."""
    lines: list[str] = []

    def visit(n: UsageNode, lead: str, branch: str) -> None:
        r = n.run
        seconds = f"{n.seconds:.1f} s" if n.seconds is not None else "running"
        lines.append(f"{lead}{branch}{r.id} [{r.status.value}] {r.persona or '-'} on "
                     f"{r.model}, {seconds}: {_figures(n.own)}")  # fmt: skip
        inner = lead + ("   " if branch == "└─ " else "│  " if branch else "")
        items: list[AgentUsage | UsageNode] = [*n.agents, *n.children]
        for i, item in enumerate(items):
            mark = "└─ " if i == len(items) - 1 else "├─ "
            if isinstance(item, AgentUsage):
                lines.append(f"{inner}{mark}sub-agent {item.persona}: {_figures(item.totals)}")
            else:
                visit(item, inner, mark)

    visit(node, "", "")
    runs = len(node.walk())
    lines.append(f"total ({runs} run(s)): {_figures(node.total)}")
    if node.run.parent_run_id:
        lines.append(f"started by run {node.run.parent_run_id} (its tree: personae runs show "
                     f"{node.run.parent_run_id} --tree)")  # fmt: skip
    return lines
