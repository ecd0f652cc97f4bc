"""Shared scripted pieces of the sub-agent tests: the lead persona and its sub-agent
personas (reader, scratch, relay), scenario steps that delegate, and the runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _helpers import VALIDATOR_OK as OK
from _helpers import build_project, run_scenario
from _helpers import events_of as events
from personae.team.result import RunResult

LEAD = """---
name: lead
description: Delegates.
tools: [read_file, write_file, agent]
---
You are lead.
"""

READER = """---
name: reader
description: Reads one file.
tools: [read_file]
max_steps: 2
context: isolated
---
CHILD-READER: You read files and summarize them.
Nothing else."""

SCRATCH = """---
name: scratch
description: Works in a scratch folder.
tools: [write_file, read_file]
needs_temp_workspace: true
context: brief
---
CHILD-SCRATCH: you work in a temporary folder."""

RELAY = """---
name: relay
description: Passes work on.
tools: [read_file, agent]
context: fork
---
CHILD-RELAY: pass the task on."""


def make_project(root: Path) -> Path:
    personas = {"lead": LEAD, "reader": READER, "scratch": SCRATCH, "relay": RELAY}
    files = {
        ".personae/directive.md": "DIRECTIVE-D: stay in the project.",
        "secret.txt": "SECRET-CONTENT-42\n",
    }
    return build_project(root, personas, files)


def delegate(name: str, task: str) -> dict[str, Any]:
    call = {"name": "agent", "args": {"name": name, "task": task}}
    return {"when": {"role": "worker"}, "tool_calls": [call]}


def child(marker: str, **answer: Any) -> dict[str, Any]:
    return {"when": {"contains": marker}, **answer}


def call(name: str, **args: Any) -> dict[str, Any]:
    """A call of tool ``name`` with ``args``."""
    return {"name": name, "args": args}


def delegation(
    name: str, task: str, marker: str, *calls: dict[str, Any], **last: Any
) -> list[dict[str, Any]]:
    """The worker delegates ``task`` to persona ``name``; the child (its prompt holds
    ``marker``) makes each of ``calls`` (:func:`call`) in turn and then answers ``last``
    (``text=...`` or ``error=...``)."""
    return [
        delegate(name, task),
        *(child(marker, tool_calls=[c]) for c in calls),
        child(marker, **last),
    ]


def subagent_end(outcome: RunResult[Any]) -> Any:
    """The first sub-agent ``end`` event of the run."""
    return next(e for e in events(outcome, "subagent") if e.data["phase"] == "end")


def turn(*middle: dict[str, Any], final_worker: str = "done") -> list[dict[str, Any]]:
    return [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Delegate it"}]}},
        *middle,
        {"when": {"role": "worker"}, "text": final_worker},
        {"when": {"role": "validator"}, "output": OK},
        {"when": {"role": "manager"}, "text": "final"},
    ]


def run(
    root: Path, steps: list[dict[str, Any]], rules: list[dict[str, Any]] | None = None
) -> tuple[RunResult[Any], Any]:
    return run_scenario(
        root, steps, "Delegate the reading.", persona="lead", rules=rules, model_name="scripted:t"
    )
