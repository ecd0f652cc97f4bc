"""The personae error tree.

Every error a user can cause or meet derives from :class:`PersonaeError`.
Usage errors (bad files, bad config, unknown names) carry the file, line and
field where known, and render as ``file:line: message``. Run errors carry data
(never loggers). The CLI turns any ``PersonaeError`` into one line on stderr
and exit code 1.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict, Unpack

__all__ = [
    "AmbiguousNameError",
    "BudgetExceededError",
    "CommandLineError",
    "ConfigError",
    "ErrorPlace",
    "FrontmatterError",
    "ModelNotConfiguredError",
    "PersonaeError",
    "RunError",
    "ToolError",
    "UnknownNameError",
    "UsageError",
    "closest_name",
    "first_validation_error",
    "yaml_error_line",
]


class PersonaeError(Exception):
    """Root of every error personae raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ErrorPlace(TypedDict, total=False):
    """Where a usage error points; the keyword arguments of :class:`UsageError` after the
    message, passed on unchanged by the subclasses that add their own."""

    file: str | Path | None
    """The file (rendered first)."""
    line: int | None
    """1-based line in ``file``."""
    field: str | None
    """The field, flag or option (rendered before the message)."""


class UsageError(PersonaeError):
    """A user mistake: a bad file, field, flag or name.

    Rendered as ``file:line: message`` (or ``file: message``, or just the message).
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.file = Path(file) if file is not None else None
        self.line = line
        self.field = field

    def location(self) -> str:
        """``file:line`` (or ``file``), empty when the error has no file."""
        if self.file is None:
            return ""
        return f"{self.file}:{self.line}" if self.line is not None else str(self.file)

    def __str__(self) -> str:
        where = self.location()
        text = f"{self.field}: {self.message}" if self.field else self.message
        return f"{where}: {text}" if where else text


class CommandLineError(UsageError):
    """Bad command-line usage found after parsing: a flag or argument names something that
    is not there (an unknown persona, a model spec that does not parse, a missing task).

    The CLI prints it as one line and exits 2, like an unknown option.
    """

    @classmethod
    def of(cls, error: UsageError) -> CommandLineError:
        """``error`` as command-line usage (same message and place)."""
        return cls(error.message, file=error.file, line=error.line, field=error.field)


class ConfigError(UsageError):
    """Invalid configuration (settings, ``.personae/config.yaml``, profiles)."""


class ModelNotConfiguredError(UsageError):
    """No model was given and none is configured."""


def closest_name(name: str, choices: Iterable[str]) -> str | None:
    """The valid name closest to ``name``, or ``None`` when nothing is close."""
    options = list(choices)
    lowered = {c.lower(): c for c in options}
    if name.lower() in lowered:
        return lowered[name.lower()]
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return lowered[match[0]] if match else None


class UnknownNameError(UsageError):
    """A name (tool, persona, role, profile) that is not defined.

    The message lists the valid names and the closest match.
    """

    def __init__(
        self,
        kind: str,
        name: str,
        choices: Iterable[str],
        **place: Unpack[ErrorPlace],
    ) -> None:
        valid = sorted(set(choices))
        self.kind = kind
        self.name = name
        self.choices = valid
        self.closest = closest_name(name, valid)
        hint = f"; did you mean {self.closest!r}?" if self.closest else ""
        listing = ", ".join(valid) if valid else "(none)"
        super().__init__(f"unknown {kind} {name!r}{hint} (valid: {listing})", **place)


class AmbiguousNameError(UnknownNameError):
    """A bare name two plugins share (``code-reviewer`` of ``feature-dev`` and of
    ``pr-review-toolkit``): each is reached by its ``plugin:name``, the bare name by neither."""

    def __init__(
        self, kind: str, name: str, choices: Iterable[str], **place: Unpack[ErrorPlace]
    ) -> None:
        super().__init__(kind, name, choices, **place)
        self.message = f"{kind} {name!r} is ambiguous: name one of {', '.join(self.choices)}"


class RunError(PersonaeError):
    """Something went wrong while running; carries data about what and where."""

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.data: dict[str, Any] = data


class ToolError(RunError):
    """A tool call failed (returned to the model as a tool error, never a crash)."""

    def __init__(self, tool: str, message: str, **data: Any) -> None:
        super().__init__(f"{tool}: {message}", tool=tool, **data)
        self.tool = tool


class BudgetExceededError(RunError):
    """Pinned content alone does not fit the token budget."""

    def __init__(self, needed: int, budget: int, *, what: str = "pinned content") -> None:
        over = needed - budget
        super().__init__(
            f"{what} needs {needed} tokens but the budget is {budget} ({over} over)",
            needed=needed,
            budget=budget,
            over=over,
        )
        self.needed = needed
        self.budget = budget
        self.over = over


def first_validation_error(exc: Any, model: Any = None) -> tuple[str, str]:
    """The message and the dotted location (``steps.0.id``; empty for the whole value) of
    the first error of a pydantic ``ValidationError`` (duck-typed: this module does not
    import pydantic, so the CLI starts without it).

    A field the model does not have comes first (a misspelt ``persna`` is also why
    ``persona`` is missing): ``unknown field 'persna'; did you mean 'persona'?``, the
    valid names taken from the fields missing beside it, or from ``model`` (the pydantic
    model class that was validated) walked along the error's location.
    """
    errors = exc.errors()
    extra = [e for e in errors if e.get("type") == "extra_forbidden" and e["loc"]]
    if not extra:
        first = errors[0]
        return str(first["msg"]), ".".join(str(p) for p in first["loc"])
    loc = tuple(extra[0]["loc"])
    key, parent = str(loc[-1]), loc[:-1]
    missing = [
        str(e["loc"][-1]) for e in errors
        if e.get("type") == "missing" and tuple(e["loc"][:-1]) == parent
    ]  # fmt: skip
    fields = _model_fields(model, parent)
    closest = closest_name(key, missing) or closest_name(key, fields)
    hint = f"; did you mean {closest!r}?" if closest else ""
    listing = f" (valid: {', '.join(sorted(fields))})" if fields else ""
    return f"unknown field {key!r}{hint}{listing}", ".".join(str(p) for p in loc)


def _model_fields(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The field names (aliases where set) of the model found at ``loc`` below ``model``
    (list indexes skipped), or none when the way there is not a model's field."""
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int):
            continue
        fields = getattr(model, "model_fields", {})
        found = fields.get(part) or next(
            (f for f in fields.values() if getattr(f, "alias", None) == part), None
        )
        model = _inner_model(found.annotation) if found is not None else None
    fields = getattr(model, "model_fields", None)
    if not fields:
        return []
    return [getattr(f, "alias", None) or name for name, f in fields.items()]


def _inner_model(annotation: Any) -> Any:
    """The model class inside ``annotation`` (``list[Step]``, ``Step | None`` ...)."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in typing.get_args(annotation):
        inner = _inner_model(arg)
        if inner is not None:
            return inner
    return None


def yaml_error_line(exc: Exception) -> int | None:
    """The 1-based line a PyYAML error points at (its problem mark), if it has one."""
    mark = getattr(exc, "problem_mark", None)
    return mark.line + 1 if mark is not None else None


class FrontmatterError(ValueError):
    """A file's YAML frontmatter is missing or malformed (persona, skill and memory files).

    Raised by the frontmatter readers; the loaders turn it into a problem or a
    :class:`UsageError` naming the file (``line`` is 1-based in the file).
    """

    def __init__(
        self, message: str, line: int | None = None, *, missing: bool = False, unsafe: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.missing = missing
        """True when the file has no frontmatter at all."""
        self.unsafe = unsafe
        """True for a recursive alias, an alias bomb or deep nesting (never read leniently)."""
