"""The viewer's run tree: a run, the runs it started in other processes, and what each used."""

from __future__ import annotations

from personae.telemetry.usagetree import Totals, UsageNode
from personae.ui._html import badge, h, url

__all__ = ["usage_panel"]


def _cost(totals: Totals) -> str:
    cost = totals.cost
    if not cost.unpriced:
        return f"cost {cost.priced:.6g}"
    return f'<span title="no price for {h(", ".join(cost.unpriced))}">cost unknown</span>'


def _figures(totals: Totals) -> str:
    return (
        f"{totals.calls} call(s) · {totals.input_tokens:,} in / {totals.output_tokens:,} out "
        f"(ours {totals.counted_input_tokens:,} in) · {_cost(totals)}"
    )


def _item(node: UsageNode, current: str) -> str:
    r = node.run
    seconds = f"{node.seconds:.1f} s" if node.seconds is not None else "running"
    name = f"<code>{h(r.id)}</code>"
    link = name if r.id == current else f'<a href="{url("runs", r.id)}">{name}</a>'
    inner = [
        f'<li class="agent">sub-agent {h(a.persona)}: {_figures(a.totals)}</li>'
        for a in node.agents
    ]
    inner += [_item(child, current) for child in node.children]
    below = f"<ul>{''.join(inner)}</ul>" if inner else ""
    return (
        f'<li data-run="{h(r.id)}">{link} {badge(r.status)} {h(r.persona or "-")} · '
        f"{h(seconds)} · {_figures(node.own)}{below}</li>"
    )


def usage_panel(node: UsageNode | None, current: str) -> str:
    """The tree below ``node`` with each run's figures and the tree's total; empty for a run
    that started no other run and was started by none."""
    if node is None or (not node.children and not node.run.parent_run_id):
        return ""
    parent = node.run.parent_run_id
    up = (
        f'<p class="muted">started by run <a href="{url("runs", parent)}"><code>{h(parent)}'
        "</code></a></p>"
        if parent
        else ""
    )
    total = node.total
    return (
        f'<section class="usage-tree"><h2>Run tree</h2>{up}<ul class="tree">'
        f"{_item(node, current)}</ul><p><b>Total ({len(node.walk())} run(s)):</b> "
        f"{_figures(total)}</p></section>"
    )
