"""The aggregated chain report (Markdown and JSON), written atomically."""

from __future__ import annotations

import json

from personae.fsutil import write_atomic
from personae.handover.schema import now_iso
from personae.workflow.outcome import ChainOutcome

__all__ = ["render_report", "write_report"]


def render_report(outcome: ChainOutcome) -> str:
    """One Markdown report: a table of steps, then each step's output and next steps."""
    wf = outcome.workflow
    lines = [f"# Chain {wf.name}: {outcome.status}", ""]
    if wf.description:
        lines += [wf.description.strip(), ""]
    lines += [
        "| step | persona | status | attempts | seconds |",
        "|---|---|---|---|---|",
    ]
    for step in wf.steps():
        st = outcome.steps[step.id]
        note = " (resumed)" if step.id in outcome.resumed else ""
        lines.append(
            f"| {step.id} | {step.persona} | {st.status}{note} | {st.attempts} "
            f"| {st.duration:.2f} |"
        )
    for step in wf.steps():
        st = outcome.steps[step.id]
        lines += ["", f"## {step.id} ({step.persona}): {st.status}", ""]
        if st.output:
            lines += [st.output.strip(), ""]
        if st.error:
            lines += [f"Error: {st.error}", ""]
        if st.artifacts:
            lines += ["Artifacts: " + ", ".join(st.artifacts), ""]
        if st.next_steps:
            lines += ["Next steps:", *[f"- {n}" for n in st.next_steps], ""]
    return "\n".join(lines).rstrip() + "\n"


def write_report(outcome: ChainOutcome) -> None:
    """Write ``report.md`` and ``report.json`` into the state directory."""
    outcome.report_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(outcome.report_path, render_report(outcome).encode("utf-8"), mode=0o600)
    body = {
        "workflow": outcome.workflow.name,
        "status": outcome.status,
        "exitCode": outcome.exit_code,
        "writtenAt": now_iso(),
        "steps": {k: vars(v) for k, v in outcome.steps.items()},
    }
    data = (json.dumps(body, indent=2) + "\n").encode("utf-8")
    write_atomic(outcome.report_path.with_suffix(".json"), data, mode=0o600)
