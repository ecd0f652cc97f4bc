"""Declarative chains: a workflow of persona steps, sequential or fanned out.

A workflow file (YAML)::

    name: sales-report
    model: scripted:scenario.yaml      # optional, passed to every child as --model
    defaults: {timeout: 300, retries: 2, backoff: 1}
    steps:
      - id: analyse
        persona: data-analyst
        task: Analyse data/sales.csv
        files: ["data/sales.csv:data:Monthly sales"]
      - parallel:                      # a fan-out group (runs concurrently)
          - {id: regions, persona: data-analyst, task: ..., inputs: [analyse]}
          - {id: products, persona: data-analyst, task: ..., inputs: [analyse]}
      - id: report
        persona: report-writer
        task: Write the report
        inputs: [regions, products]
        num_cpus: 1                    # on Ray: CPUs and custom resources per step
        resources: {report_node: 1}

``inputs`` name earlier steps whose results (output, artifacts, next steps)
flow into the step's handover; without ``inputs`` a step takes every step of
the stage before it. Nothing in a workflow is executed except ``personae run``
children for its personas.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from personae.errors import UsageError, first_validation_error, yaml_error_line
from personae.fsutil import read_input
from personae.handover.create import parse_file_spec
from personae.handover.schema import ArtifactFile
from personae.limits import DEFAULTS

__all__ = ["Stage", "Step", "StepDefaults", "Workflow", "load_workflow"]

_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_RESOURCE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$")
_BUILTIN_RESOURCES = frozenset({"CPU", "GPU", "memory", "object_store_memory"})


class StepDefaults(BaseModel):
    """Run settings for every step (a step may override them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float = Field(default=DEFAULTS.handover_timeout, gt=0)
    """Seconds per attempt."""
    retries: int = Field(default=DEFAULTS.handover_retries, ge=0, le=10)
    """Retries after the first attempt."""
    backoff: float = Field(default=DEFAULTS.handover_backoff, ge=0)
    """First retry delay in seconds (doubles each retry)."""


class Step(BaseModel):
    """One persona run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    """Unique step id (lowercase letters, digits, ``-``, ``_``)."""
    persona: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]*$")
    """The persona that runs the step."""
    task: str = Field(min_length=1, max_length=20_000)
    """What it should do."""
    inputs: list[str] | None = None
    """Earlier steps whose results it receives (default: the previous stage)."""
    files: list[ArtifactFile] = Field(default_factory=list)
    """Artifact files (``PATH:TYPE:DESCRIPTION`` strings or objects)."""
    insights: list[str] = Field(default_factory=list)
    """Insights to pass."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Structured data to pass."""
    model: str | None = None
    """Model for this step (overrides the workflow's)."""
    profile: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]*$")
    """Context profile of the step's worker (builder, verifier ...)."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds per attempt (overrides defaults)."""
    retries: int | None = Field(default=None, ge=0, le=10)
    """Retries (overrides defaults)."""
    num_cpus: float | None = Field(default=None, gt=0, le=1024)
    """CPUs the step needs on a Ray cluster (default one; the local executor ignores it)."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources the step needs, e.g. ``{gpu_box: 1}`` (the local executor
    ignores them)."""

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError(f"step id {value!r} must match {_ID.pattern}")
        return value

    @field_validator("resources")
    @classmethod
    def _resources(cls, value: dict[str, float]) -> dict[str, float]:
        for name, amount in value.items():
            if not _RESOURCE.match(name) or name in _BUILTIN_RESOURCES:
                raise ValueError(
                    f"resource {name!r} must match {_RESOURCE.pattern} and not be one of "
                    f"{', '.join(sorted(_BUILTIN_RESOURCES))} (use num_cpus)"
                )
            if not 0 < amount <= 1_000_000:
                raise ValueError(f"resource {name!r}: amount must be > 0 and <= 1000000")
        return value

    @field_validator("files", mode="before")
    @classmethod
    def _files(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        try:
            return [parse_file_spec(v, "file") if isinstance(v, str) else v for v in value]
        except UsageError as exc:
            raise ValueError(exc.message) from None


Stage = list[Step]
"""Steps that may run at the same time (one step, or a fan-out group)."""


class Workflow(BaseModel):
    """A parsed workflow: stages run in order; steps inside a stage run concurrently."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """Workflow name (names the state directory)."""
    description: str = ""
    """What it does."""
    model: str | None = None
    """Model passed to every child (``--model``), e.g. ``scripted:scenario.yaml``."""
    defaults: StepDefaults = Field(default_factory=StepDefaults)
    """Run settings."""
    stages: list[list[Step]]
    """Stages in order."""
    path: Path
    """The workflow file."""
    sha256: str
    """Hash of the workflow file (a checkpoint only resumes the same workflow)."""

    def steps(self) -> list[Step]:
        """Every step, in order."""
        return [s for stage in self.stages for s in stage]

    def inputs_of(self, step: Step) -> list[str]:
        """The step ids whose results flow into ``step``."""
        if step.inputs is not None:
            return list(step.inputs)
        for i, stage in enumerate(self.stages):
            if step in stage:
                return [s.id for s in self.stages[i - 1]] if i > 0 else []
        return []


def _stages(raw_steps: Any, path: Path) -> list[Any]:
    if not isinstance(raw_steps, list) or not raw_steps:
        raise UsageError("'steps' must be a non-empty list", file=path, field="steps")
    stages: list[Any] = []
    for i, item in enumerate(raw_steps):
        if isinstance(item, dict) and set(item) == {"parallel"}:
            group = item["parallel"]
            if not isinstance(group, list) or not group:
                raise UsageError(
                    "'parallel' must be a non-empty list of steps", file=path, field=f"steps[{i}]"
                )
            stages.append(group)
        else:
            stages.append([item])
    return stages


def _field_in_file(loc: str, raw_steps: list[Any]) -> str:
    """``loc`` in the model (``stages.1.0.persona``) as the file writes it (``steps.1.persona``,
    or ``steps.1.parallel.0.persona`` in a fan-out group)."""
    parts = loc.split(".")
    if parts[0] != "stages" or len(parts) < 3 or not (parts[1] + parts[2]).isdigit():
        return loc
    i, j = int(parts[1]), parts[2]
    grouped = isinstance(raw_steps[i], dict) and set(raw_steps[i]) == {"parallel"}
    return ".".join(["steps", str(i), *(["parallel", j] if grouped else []), *parts[3:]])


def load_workflow(path: Path | str) -> Workflow:
    """Read and validate a workflow file (ids unique, inputs refer to earlier steps)."""
    file = Path(path).resolve()
    data = read_input(file, max_bytes=1_000_000, what="workflow file", size="1 MB")
    try:
        raw = yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError("workflow is not valid UTF-8", file=file) from None
    except yaml.YAMLError as exc:
        raise UsageError("malformed YAML", file=file, line=yaml_error_line(exc)) from None
    if not isinstance(raw, dict):
        raise UsageError("a workflow must be a mapping", file=file)
    body = {k: v for k, v in raw.items() if k != "steps"}
    body["stages"] = _stages(raw.get("steps"), file)
    body["path"] = file
    body["sha256"] = hashlib.sha256(data).hexdigest()
    try:
        workflow = Workflow.model_validate(body)
    except ValidationError as exc:
        message, loc = first_validation_error(exc, Workflow)
        message = message.replace("path, sha256, stages", "steps")  # as the file names them
        raise UsageError(message, file=file, field=_field_in_file(loc, raw["steps"])) from None
    seen: set[str] = set()
    earlier: set[str] = set()
    for stage in workflow.stages:
        for step in stage:
            if step.id in seen:
                raise UsageError(f"duplicate step id {step.id!r}", file=file, field="steps")
            seen.add(step.id)
            for name in step.inputs or []:
                if name not in earlier:
                    raise UsageError(
                        f"step {step.id!r}: input {name!r} is not a step of an earlier stage",
                        file=file,
                        field="inputs",
                    )
        earlier |= {step.id for step in stage}
    return workflow
