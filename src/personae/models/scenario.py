"""Scenario files for the scripted replay server: what it answers, in order or by match.

A scenario is YAML::

    description: what this scenario shows
    steps:            # answered in order, each once
      - when: {role: manager}          # optional: the request must match
        output: {subtasks: [...]}       # structured output (calls the output tool)
      - tool_calls:
          - {name: read_file, args: {path: README.md}}
      - text: "The README says ..."
    rules:            # answered whenever they match (after the next step did not)
      - when: {role: validator}
        output: {approved: true, ...}

A scenario may imitate a real server (``server: {kind: llama-cpp-python, window: 2048}``;
kinds ``llama.cpp``, ``llama-cpp-python``, ``vllm``, ``ollama``): the scripted server
then tells its window the way that server does (or does not), refuses a request longer
than the window with that server's error, and keeps its habits (llama-cpp-python
refuses ``content: null`` on assistant turns and OpenAI's ``json_schema`` response
format with HTTP 500). Every scripted server cuts a text answer at the request's
``max_tokens`` (4 characters a token) and says so (``finish_reason: length``).

An answer has one of ``text``, ``tool_calls`` (optionally with ``text``),
``output`` or ``error`` (``{status: 429, message: ...}``). ``when`` keys:
``role`` (the ``personae-role: X`` marker of a team role), ``contains`` (text
anywhere in the request), ``last_contains`` (the last message), ``tool`` (a
tool offered in the request). The model answering is *scripted*: it is not a
real language model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from personae.errors import UsageError, first_validation_error, yaml_error_line
from personae.fsutil import read_regular
from personae.models.roles import ROLE_MARKER

__all__ = [
    "ROLE_MARKER",
    "Answer",
    "Match",
    "Scenario",
    "ScenarioError",
    "ScriptedToolCall",
    "ServerImitation",
    "load_scenario",
]

_MAX_BYTES = 10_000_000
"""Largest scenario file read."""


class ScenarioError(UsageError):
    """A scenario file is malformed."""


class Match(BaseModel):
    """Conditions a request must meet for an answer to apply (all given ones)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str | None = None
    """Team role marker present in the system/instructions text."""
    contains: str | None = None
    """Substring anywhere in the request's messages."""
    last_contains: str | None = None
    """Substring in the last message of the request."""
    tool: str | None = None
    """A tool of this name is offered in the request."""


class ScriptedToolCall(BaseModel):
    """One tool call the scripted replay server makes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Tool name."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Tool arguments."""


class Answer(BaseModel):
    """One scripted answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    when: Match | None = None
    """Conditions; ``None`` matches any request."""
    text: str | None = None
    """Assistant text."""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    """Tool calls to make."""
    output: dict[str, Any] | None = None
    """Structured output: sent as a call to the request's output tool."""
    error: dict[str, Any] | None = None
    """An HTTP error instead of an answer: ``{status, message}``."""
    note: str = ""
    """What this step shows (for readers of the scenario)."""
    delay: float = Field(default=0.0, ge=0.0, le=30.0)
    """Seconds before the answer is sent (a slow model, for call timeouts)."""
    stream_pause: float = Field(default=0.0, ge=0.0, le=5.0)
    """Seconds between the pieces of a streamed text (``stream: true`` requests)."""

    @model_validator(mode="after")
    def _one_kind(self) -> Answer:
        kinds = sum([self.output is not None, bool(self.tool_calls), self.error is not None]) + (
            1 if self.text is not None and not self.tool_calls else 0
        )
        if kinds != 1:
            raise ValueError("an answer needs exactly one of text, tool_calls, output, error")
        return self


class ServerImitation(BaseModel):
    """The real server a scenario's scripted server behaves like."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["llama.cpp", "llama-cpp-python", "vllm", "ollama"]
    """Which server it imitates."""
    window: int = Field(ge=64, le=10_000_000)
    """The window it has (prompt tokens counted as characters / 4)."""


class Scenario(BaseModel):
    """An ordered list of steps plus reusable matched rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    """What the scenario shows."""
    steps: list[Answer] = Field(default_factory=list)
    """Answers consumed in order."""
    rules: list[Answer] = Field(default_factory=list)
    """Answers used whenever they match (checked after the next step)."""
    server: ServerImitation | None = None
    """The real server it imitates (``None``: none; it says it is scripted)."""
    source: Path | None = None
    """The file it came from."""


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate a scenario file (YAML)."""
    file = Path(path)
    try:
        raw: Any = yaml.safe_load(read_regular(file, max_bytes=_MAX_BYTES).decode("utf-8"))
    except FileNotFoundError as exc:
        raise ScenarioError("scenario file not found", file=file) from exc
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario: {exc.strerror}", file=file) from exc
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"not UTF-8 text (byte {exc.start})", file=file) from None
    except yaml.YAMLError as exc:
        raise ScenarioError("malformed YAML", file=file, line=yaml_error_line(exc)) from exc
    if not isinstance(raw, dict):
        raise ScenarioError("a scenario must be a mapping with 'steps' and/or 'rules'", file=file)
    try:
        scenario = Scenario.model_validate({**raw, "source": file})
    except ValidationError as exc:
        message, field = first_validation_error(exc)
        raise ScenarioError(message, file=file, field=field) from exc
    if not scenario.steps and not scenario.rules:
        raise ScenarioError("a scenario needs at least one step or rule", file=file)
    return scenario
