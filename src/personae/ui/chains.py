"""Chain pages: the list of chains and one chain as a graph of steps (inline SVG)."""

from __future__ import annotations

import json
from pathlib import Path

from personae.errors import UnknownNameError
from personae.security.policy import redact_secrets
from personae.ui._html import badge, h, layout, short, url
from personae.ui.data import ChainStep, ChainView, Reader
from personae.workflow.outcome import StepStatus

__all__ = ["chain_page", "chains_page", "handover_page"]

_W, _H, _GAP_X, _GAP_Y, _PAD = 220, 74, 90, 26, 20
_TONE: dict[str, str] = {
    StepStatus.SUCCESS: "good",
    StepStatus.PARTIAL: "warn",
    StepStatus.RUNNING: "warn",
    StepStatus.PENDING: "plain",
    StepStatus.FAILURE: "bad",
    StepStatus.SKIPPED: "plain",
}
"""Badge tone by step state (a checkpoint's string looks up its member)."""


def chains_page(reader: Reader) -> str:
    """Every chain with a checkpoint in the project."""
    names = reader.chain_names()
    if not names:
        body = (
            '<p class="empty">No chains here yet. Run one with '
            "<code>personae chain run WORKFLOW.yaml</code>.</p>"
        )
    else:
        items = "".join(f'<li><a href="{url("chains", n)}">{h(n)}</a></li>' for n in names)
        body = f'<ul class="chains">{items}</ul>'
    return layout("Chains", body)


def _positions(steps: list[ChainStep]) -> dict[str, tuple[int, int]]:
    rows: dict[int, int] = {}
    out = {}
    for step in steps:
        row = rows.get(step.stage, 0)
        rows[step.stage] = row + 1
        out[step.id] = (_PAD + step.stage * (_W + _GAP_X), _PAD + row * (_H + _GAP_Y))
    return out


def _svg(chain: ChainView) -> str:
    pos = _positions(chain.steps)
    width = max(x for x, _ in pos.values()) + _W + _PAD if pos else 100
    height = max(y for _, y in pos.values()) + _H + _PAD if pos else 60
    edges, nodes = [], []
    for step in chain.steps:
        x, y = pos[step.id]
        for source in step.inputs:
            if source in pos:
                sx, sy = pos[source]
                edges.append(
                    f'<path class="edge" d="M{sx + _W},{sy + _H // 2} C{sx + _W + 45},'
                    f'{sy + _H // 2} {x - 45},{y + _H // 2} {x},{y + _H // 2}" '
                    f'marker-end="url(#arrow)" data-from="{h(source)}" data-to="{h(step.id)}"/>'
                )
        status = str(step.state.get("status", "pending"))
        tone = _TONE.get(status, "plain")
        secs = step.state.get("duration")
        took = f" · {secs:.1f} s" if isinstance(secs, int | float) and secs else ""
        target = (
            url("runs", step.run_ids[-1])
            if step.run_ids
            else url("chains", chain.name, "handovers", step.id)
        )
        nodes.append(
            f'<a href="{h(target)}" class="node" data-step="{h(step.id)}">'
            f'<rect class="{tone}" x="{x}" y="{y}" width="{_W}" height="{_H}" rx="8"/>'
            f'<text x="{x + 12}" y="{y + 24}" class="title">{h(short(step.id, 24))}</text>'
            f'<text x="{x + 12}" y="{y + 44}">{h(short(step.persona, 28))}</text>'
            f'<text x="{x + 12}" y="{y + 63}" class="st">{h(status)}{h(took)}</text></a>'
        )
    return (
        f'<svg class="graph" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        'role="img" aria-label="chain steps"><defs><marker id="arrow" viewBox="0 0 10 10" '
        'refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z"/></marker></defs>'
        f"{''.join(edges)}{''.join(nodes)}</svg>"
    )


def chain_page(reader: Reader, name: str) -> str:
    """A chain: its graph of steps and a table with runs and handover files."""
    chain = reader.chain(name)
    rows = []
    for step in chain.steps:
        st = step.state
        runs = (
            " ".join(f'<a href="{url("runs", r)}"><code>{h(r)}</code></a>' for r in step.run_ids)
            or '<span class="muted">-</span>'
        )
        handover = (
            f'<a href="{url("chains", chain.name, "handovers", step.id)}">handover file</a>'
            if st.get("handover")
            else "-"
        )
        said = st.get("error") or st.get("output") or ""
        rows.append(
            f'<tr data-step="{h(step.id)}"><td><b>{h(step.id)}</b></td><td>{h(step.persona)}</td>'
            f"<td>{badge(st.get('status', 'pending'))}</td><td>{h(st.get('attempts', 0))}</td>"
            f"<td>{runs}</td><td>{handover}</td><td>{h(short(said, 140))}</td></tr>"
        )
    problem = f'<p class="warning">{h(chain.problem)}</p>' if chain.problem else ""
    live = any(s.state.get("status") == StepStatus.RUNNING for s in chain.steps)
    body = (
        f"{problem}<p class='muted'>State in <code>{h(chain.folder)}</code>; checkpoint updated "
        f"{h(chain.updated_at)}</p>"
        f'<div id="chain" data-poll="{url("chains", chain.name)}" '
        f'data-live="{"1" if live else "0"}">{_svg(chain)}'
        '<table class="steps"><thead><tr><th>step</th><th>persona</th><th>status</th>'
        "<th>attempts</th><th>runs</th><th>handover</th><th>output or error</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    return layout(f"Chain {chain.name}", body, crumbs=[("/chains", "chains")])


def handover_page(reader: Reader, name: str, step_id: str) -> str:
    """A step's handover file (secrets redacted), pretty-printed."""
    chain = reader.chain(name)
    steps = {s.id: s for s in chain.steps}
    step = steps.get(step_id)
    if step is None or not isinstance(step.state.get("handover"), str):
        raise UnknownNameError("handover step", step_id, list(steps))
    path = Path(step.state["handover"])
    text = reader.read_text(path)
    try:
        shown = json.dumps(redact_secrets(json.loads(text)), indent=2, ensure_ascii=False)
    except ValueError:
        shown = str(redact_secrets(text))
    body = f"<p class='muted'><code>{h(path)}</code></p><pre class='handover'>{h(shown)}</pre>"
    return layout(
        f"Handover of step {step_id}",
        body,
        crumbs=[("/chains", "chains"), (url("chains", name), name)],
    )
