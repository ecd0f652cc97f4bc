"""The tool abstraction: a name, a description, a parameter model and an implementation."""

from __future__ import annotations

import asyncio
import inspect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from personae.errors import (
    ConfigError,
    ToolError,
    UnknownNameError,
    UsageError,
    first_validation_error,
)
from personae.layout import GRANTABLE
from personae.tools.workspace import Workspace

__all__ = ["Tool", "ToolContext", "ToolLimits"]

P = TypeVar("P", bound=BaseModel)

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, kw_only=True)
class ToolLimits:
    """Caps the built-in tools apply. ``None`` means no limit."""

    read_max_bytes: int | None = 100_000
    """Bytes ``read_file`` returns at most (a notice says when it stopped early; ~25k tokens)."""
    write_max_bytes: int | None = 10 * 1024 * 1024
    """Largest content ``write_file``/``edit_file`` will write."""
    list_max_entries: int | None = 1000
    """Entries ``list_dir`` and ``glob`` return at most."""
    walk_max_files: int | None = 50_000
    """Files ``glob`` and ``grep`` look at before stopping with a notice."""
    grep_max_results: int | None = 200
    """Matching lines ``grep`` returns at most."""
    grep_max_file_bytes: int | None = 4 * 1024 * 1024
    """Files larger than this are skipped by ``grep``."""
    shell_timeout: float | None = 60.0
    """Seconds a ``run_shell`` command may run (the model may ask for less, never more)."""
    shell_max_output: int | None = 64 * 1024
    """Bytes of combined stdout/stderr ``run_shell`` keeps."""
    shell_grace: float = 0.5
    """Seconds to wait for pipes to close after the command exits before killing its group."""
    shell_env_allow: tuple[str, ...] = ()
    """Extra environment variable names passed to ``run_shell`` (dangerous ones are refused)."""
    shell_sandbox: Literal["auto", "required", "off"] = "auto"
    """Run ``run_shell`` commands under bubblewrap: ``auto`` when it works here (else a
    warning once per run), ``required`` (refuse without it) or ``off``."""
    shell_network: bool = False
    """Let sandboxed commands use the network (off: only their own loopback)."""
    shell_allow_paths: tuple[str, ...] = ()
    """Paths under the user's home a sandboxed command may read (``~/...`` or absolute)."""
    control_write: tuple[str, ...] = ()
    """Control paths (:data:`personae.tools.control.GRANTABLE`, e.g. ``.git``) the file
    tools and sandboxed commands may write; every other one is read-only to them."""
    fetch_timeout: float | None = 20.0
    """Seconds a ``web_fetch`` may take in total."""
    fetch_max_bytes: int | None = 256 * 1024
    """Bytes of body ``web_fetch`` downloads and keeps (HTML shrinks when turned into text)."""
    fetch_allow_private: bool = False
    """Let ``web_fetch`` reach loopback, private, link-local (cloud metadata) and other
    non-global addresses; off by default (every request and redirect is checked)."""
    preview_chars: int = 400
    """Characters of a result kept in a call record's preview."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "control_write":
                _check_grants(value)
                continue
            if f.name == "shell_env_allow" or value is None or isinstance(value, bool):
                continue
            if not isinstance(value, int | float):
                continue  # a wrong type is reported by from_dict's validation
            if math.isnan(value):
                raise ConfigError("must be a number, got NaN", field=f.name)
            zero_ok = f.name in ("shell_grace", "preview_chars")
            if value < 0 or (value == 0 and not zero_ok):
                need = ">= 0" if zero_ok else "> 0 (or null for no limit)"
                raise ConfigError(f"must be {need}, got {value!r}", field=f.name)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, file: str | None = None) -> ToolLimits:
        """Limits from a config mapping (e.g. a ``tools:`` section); bad keys or values raise.

        Raises:
            ConfigError: an unknown key or a value of the wrong type, naming the field.
        """
        names = {f.name for f in fields(cls)}
        for key in data:
            if key not in names:
                raise UnknownNameError("tool limit", str(key), names, file=file)
        try:
            return TypeAdapter(cls).validate_python(dict(data), strict=False)
        except ConfigError as exc:
            raise ConfigError(exc.message, file=file, field=exc.field) from exc
        except ValidationError as exc:
            message, field_name = first_validation_error(exc)
            raise ConfigError(message, file=file, field=field_name) from exc


def _check_grants(names: tuple[str, ...]) -> None:
    for name in names:
        if name not in GRANTABLE:
            raise ConfigError(
                f"{name!r} cannot be granted; grantable: {', '.join(GRANTABLE)}",
                field="control_write",
            )


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a tool implementation gets besides its arguments."""

    workspace: Workspace
    """The workspace every path is confined to."""
    limits: ToolLimits = field(default_factory=ToolLimits)
    """Caps to apply."""
    tool: str = ""
    """The name of the tool being run (for error messages)."""

    def error(self, message: str, **data: Any) -> ToolError:
        """A :class:`ToolError` for this tool."""
        return ToolError(self.tool or "tool", message, **data)


@dataclass(frozen=True, eq=False)
class Tool(Generic[P]):
    """One tool: what the model sees (name, description, JSON schema) and what runs.

    ``func`` receives the validated parameter model and a :class:`ToolContext`;
    it may be synchronous (run in a worker thread) or a coroutine function. It
    raises :class:`ToolError` for failures the model should see.
    """

    name: str
    """Name the model calls the tool by."""
    description: str
    """What the tool does, for the model."""
    params: type[P]
    """Pydantic model of the arguments (its JSON schema is what the model sees)."""
    func: Callable[[P, ToolContext], Any]
    """The implementation."""

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise UsageError(f"invalid tool name {self.name!r} (letters, digits, _ and -, <= 64)")

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments (an object schema)."""
        schema = self.params.model_json_schema()
        schema.pop("title", None)
        return schema

    def validate(self, args: Mapping[str, Any] | None) -> P:
        """Validate raw arguments; a :class:`ToolError` lists what is wrong."""
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise ToolError(self.name, f"arguments must be an object, got {type(args).__name__}")
        try:
            return self.params.model_validate(dict(args))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(args)'}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            raise ToolError(self.name, f"invalid arguments: {problems}") from exc

    async def run(self, args: Mapping[str, Any] | None, ctx: ToolContext) -> str:
        """Validate ``args`` and run the implementation; returns its text result."""
        model = self.validate(args)
        if inspect.iscoroutinefunction(self.func):
            result = await self.func(model, ctx)
        else:
            result = await asyncio.to_thread(self.func, model, ctx)
            if inspect.isawaitable(result):
                result = await result
        if not isinstance(result, str):
            raise ToolError(self.name, f"tool returned {type(result).__name__}, expected text")
        return result
