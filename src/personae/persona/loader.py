"""Load one persona file (personae persona file or Claude Code agent file) into a Persona.

Both formats share one reader: a personae persona file is a superset of a
Claude Code agent file. The difference is strictness. In personae's own files
(``kind="personae"``) an unknown tool or skill is an error; in Claude Code
files (``kind="claude-code"`` or ``"plugin"``) a tool personae does not provide
is a warning, listed in ``Persona.unavailable_tools`` and left out of
``Persona.tools``, and unknown keys are kept in ``Persona.extra`` with a warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from personae.errors import closest_name, first_validation_error
from personae.persona._files import read_confined
from personae.persona._frontmatter import Document, FrontmatterError, parse_document
from personae.persona._lineends import has_crlf
from personae.persona._tools import (
    ToolCheck,
    check_tool_names,
    claude_name,
    claude_spelling,
    split_names,
    split_spawn_entries,
)
from personae.persona.model import Constraints, ContextMode, Persona, PersonaFileKind, SandboxGrant
from personae.persona.problems import LENIENT_GROUP, UNAVAILABLE_GROUP, Problem, Severity
from personae.tools.names import mcp_server_of

__all__ = [
    "CLAUDE_KEYS",
    "CRLF_NOTE",
    "PERSONAE_KEYS",
    "LoadedPersona",
    "full_description",
    "load_persona_file",
    "parse_constraints",
    "persona_from_text",
]

PERSONAE_KEYS = frozenset(
    {
        "max_steps",
        "profile",
        "needs_temp_workspace",
        "context",
        "constraints",
        "sandbox",
        "version",
        "mcp_servers",
        "disallowed_tools",
        "subagents",
    }
)
"""Frontmatter keys personae adds to the Claude Code agent format."""

CLAUDE_KEYS = frozenset(
    {"name", "description", "tools", "disallowedTools", "model", "maxTurns", "skills", "mcpServers"}
)
"""Claude Code agent keys personae interprets."""

_CLAUDE_KEPT = frozenset(
    {
        "color",
        "permissionMode",
        "hooks",
        "memory",
        "background",
        "isolation",
        "effort",
        "initialPrompt",
    }
)
# Documented Claude Code keys personae does not use: kept in `extra` without a warning.

CRLF_NOTE = (
    "Claude Code does not load this file: its lenient reading does not match lines ending "
    "in CR (CRLF line endings); personae does; save it with LF line endings"
)
"""Warning for a file that needed the lenient reading and has CRLF line endings."""

_NAME_STRICT = re.compile(r"^[a-z0-9]+([-_][a-z0-9]+)*$")
_NAME_FORBIDDEN = re.compile(r"[<>/\\\x00-\x1f\x7f\"']")
MAX_NAME = 64


@dataclass
class LoadedPersona:
    """A persona plus what the Cast needs to check it against other files."""

    persona: Persona
    """The loaded persona."""
    path: Path
    """The file it came from."""
    lines: dict[str, int] = field(default_factory=dict)
    """1-based line of each frontmatter key."""

    @property
    def strict(self) -> bool:
        """Whether unknown names are errors (personae's own files)."""
        return self.persona.source_kind is PersonaFileKind.PERSONAE


class _Sink:
    def __init__(self, path: Path, problems: list[Problem]) -> None:
        self.path = path
        self.problems = problems
        self.failed = False

    def add(
        self, line: int | None, severity: Severity, message: str, *, group: str | None = None
    ) -> None:
        if severity == "error":
            self.failed = True
        self.problems.append(
            Problem(file=self.path, line=line, severity=severity, message=message, group=group)
        )


def load_persona_file(
    path: Path,
    *,
    kind: PersonaFileKind | str,
    root: Path,
    problems: list[Problem],
    servers: Iterable[str] = (),
) -> LoadedPersona | None:
    """Load ``path``; problems are appended to ``problems``; ``None`` when it cannot load.

    ``kind`` is ``personae``, ``claude-code`` or ``plugin``; ``root`` confines
    symlinks; ``servers`` are the MCP servers configured for the project.
    """
    text = read_confined(path, root, problems)
    if text is None:
        return None
    return persona_from_text(text, path=path, kind=kind, problems=problems, servers=servers)


def persona_from_text(
    text: str,
    *,
    path: Path,
    kind: PersonaFileKind | str,
    problems: list[Problem],
    servers: Iterable[str] = (),
) -> LoadedPersona | None:
    """Parse persona file text (see :func:`load_persona_file`)."""
    kind = PersonaFileKind(kind)
    sink = _Sink(path, problems)
    strict = kind is PersonaFileKind.PERSONAE
    doc = _parse(text, path, kind, sink)
    if doc is None:
        return None
    if doc.repaired is not None:
        sink.add(
            doc.repaired.line,
            "note",
            f"{doc.repaired.message}; read leniently (values with YAML special characters "
            "quoted), as Claude Code does",
            group=LENIENT_GROUP,
        )
        if has_crlf(path):
            sink.add(doc.repaired.line, "warning", CRLF_NOTE)
    meta = doc.meta
    line = doc.line_of
    values: dict[str, Any] = {"system_prompt": doc.body, "source": path, "source_kind": kind}

    if kind is PersonaFileKind.PLUGIN:
        _plugin_defaults(meta, path)
    name = meta.get("name")
    if name is None:
        sink.add(1, "error", "missing required field 'name'")
    elif not isinstance(name, str):
        sink.add(line("name"), "error", f"name must be a string, got {type(name).__name__}")
    else:
        _check_name(name, sink, line("name"), strict)
        values["name"] = name
    desc = meta.get("description")
    if desc is None or (isinstance(desc, str) and not desc.strip()):
        sink.add(
            1 if desc is None else line("description"),
            "error",
            "missing required field 'description'",
        )
    elif not isinstance(desc, str):
        sink.add(line("description"), "error", "description must be a string")
    else:
        values["description"] = full_description(doc, sink.add)
        if desc != values["description"] and desc.split() == values["description"].split():
            values["description_as_written"] = desc

    mcp = _mcp_servers(meta, sink, line)
    values["mcp_servers"] = mcp
    known = set(servers) | set(mcp)
    _tools(meta, sink, line, values, servers=known, strict=strict)
    _scalars(meta, sink, line, values)
    _modes(meta, sink, line, values, strict)

    extra: dict[str, Any] = {}
    for key, value in meta.items():
        if key in CLAUDE_KEYS or key in PERSONAE_KEYS or key in _CLAUDE_KEPT:
            if key in _CLAUDE_KEPT:
                extra[key] = value
            continue
        extra[key] = value
        hint = _field_hint(key)
        close = f"; did you mean {hint!r}?" if hint else ""
        sink.add(
            line(key), "warning", f"unknown field {key!r} kept as is (personae ignores it){close}"
        )
    values["extra"] = extra
    if sink.failed or "name" not in values or "description" not in values:
        return None
    return LoadedPersona(persona=Persona(**values), path=path, lines=doc.key_lines)


def full_description(doc: Document, add: Callable[[int | None, Severity, str], None]) -> str:
    """The document's ``description`` (a string), not cut at an unquoted `` #``.

    Strict YAML, and so Claude Code, reads ``description: for C# #fast`` as
    ``for C#``: the rest is a comment. personae keeps the full text and warns,
    since the cut part is almost always meant as description.
    """
    desc = str(doc.meta["description"])
    full = doc.comment_cuts.get("description")
    if full is None:
        return desc.strip()
    add(
        doc.line_of("description"),
        "warning",
        f"description has an unquoted ' #': YAML and Claude Code cut it to {desc.strip()!r}; "
        "personae keeps the full text (quote the value so both read the same)",
    )
    return full.strip()


def parse_constraints(raw: Any) -> Constraints:
    """A ``constraints`` frontmatter value as :class:`Constraints`.

    Raises ``ValueError`` naming the first bad field (``constraints.safety_rules: ...``).
    """
    try:
        return Constraints.model_validate(raw)
    except ValidationError as exc:
        message, where = first_validation_error(exc, Constraints)
        label = f"constraints.{where}" if where else "constraints"
        raise ValueError(f"{label}: {message}") from None


_SKILL_TOOLS = frozenset({"allowed-tools", "allowedTools", "allowed_tools"})
"""A skill's tools field, which Claude Code ignores in an agent file (it gets every tool)."""


def _field_hint(key: str) -> str | None:
    """The field an unknown ``key`` of an agent file was meant to be, if any."""
    if key in _SKILL_TOOLS:  # a skill's field: an agent's tools are `tools`
        return "tools"
    return closest_name(key, sorted(CLAUDE_KEYS | PERSONAE_KEYS | _CLAUDE_KEPT))


def _report_unavailable(names: list[str], sink: _Sink, line: int | None) -> None:
    """Tools of a Claude Code file personae leaves out. A warning for those the persona
    would get with a change here: an MCP server's (configure the server) and an argument
    pattern (``Bash(git status:*)``: the whole tool is left out, failing closed); a note
    for Claude Code's own tools personae has no counterpart of (NotebookRead, TodoWrite ...:
    Claude Code is silent, and nothing here would give them)."""
    servers = sorted({s for n in names if (s := mcp_server_of(n)) is not None})
    fixable = [n for n in names if mcp_server_of(n) is not None or "(" in n]
    if fixable:
        why = f" (MCP servers not configured: {', '.join(servers)})" if servers else ""
        sink.add(
            line, "warning",
            f"tools personae does not provide, left out of the persona's tools: "
            f"{', '.join(fixable)}{why}",
        )  # fmt: skip
    own = [n for n in names if n not in fixable]
    if own:
        sink.add(
            line, "note",
            f"tools personae does not provide, left out of the persona's tools: {', '.join(own)}",
            group=UNAVAILABLE_GROUP,
        )  # fmt: skip


def _check_name(name: str, sink: _Sink, line: int, strict: bool) -> None:
    rule = f"lowercase letters, digits, '-' or '_', at most {MAX_NAME} chars"
    if strict:
        if len(name) > MAX_NAME or not _NAME_STRICT.match(name):
            sink.add(line, "error", f"bad name {name!r}: use {rule}")
        return
    # Claude Code files: refuse only names that cannot be passed around safely.
    if not name.strip() or len(name) > 2 * MAX_NAME or _NAME_FORBIDDEN.search(name):
        sink.add(line, "error", f"bad name {name!r}: use {rule}")
    elif not _NAME_STRICT.match(name):
        sink.add(line, "warning", f"name {name!r} is not an identifier ({rule}); used as is")


def _pick(meta: dict[str, Any], sink: _Sink, line: Any, snake: str, camel: str) -> str | None:
    if snake in meta and camel in meta:
        sink.add(line(camel), "warning", f"both {camel!r} and {snake!r} given; using {snake!r}")
    if snake in meta:
        return snake
    return camel if camel in meta else None


def _mcp_servers(meta: dict[str, Any], sink: _Sink, line: Any) -> dict[str, Any]:
    key = _pick(meta, sink, line, "mcp_servers", "mcpServers")
    if key is None or meta[key] is None:
        return {}
    raw = meta[key]
    if isinstance(raw, dict):
        return {str(k): v for k, v in raw.items()}
    if isinstance(raw, list):
        out: dict[str, Any] = {}
        for item in raw:
            if isinstance(item, str):
                out[item] = {}
            elif isinstance(item, dict):
                out.update({str(k): v for k, v in item.items()})
            else:
                sink.add(line(key), "error", f"{key} entries must be names or mappings")
        return out
    sink.add(line(key), "error", f"{key} must be a mapping or a list, got {type(raw).__name__}")
    return {}


def _tools(
    meta: dict[str, Any], sink: _Sink, line: Any, values: dict[str, Any], *, servers: set[str],
    strict: bool,
) -> None:  # fmt: skip
    """``tools`` (with ``Agent(...)`` spawn entries), ``subagents`` and ``disallowed_tools``."""
    if "tools" in meta and meta["tools"] is not None:
        _allowed_tools(meta["tools"], sink, line, values, servers=servers, strict=strict)
    if meta.get("subagents") is not None:
        try:
            listed = split_names(meta["subagents"])
        except ValueError as exc:
            sink.add(line("subagents"), "error", f"subagents {exc}")
        else:
            merged = list(values.get("subagents") or [])
            values["subagents"] = merged + [n for n in listed if n not in merged]
    key = _pick(meta, sink, line, "disallowed_tools", "disallowedTools")
    if key is not None and meta[key] is not None:
        _disallowed_tools(meta[key], key, sink, line, values, servers=servers, strict=strict)


def _split_names(raw: Any, key: str, sink: _Sink, line: Any) -> list[str] | None:
    """The names listed under ``key``; ``None`` (an error noted) when it is not a list."""
    try:
        return split_names(raw)
    except ValueError as exc:
        sink.add(line(key), "error", f"{key} {exc}")
        return None


def _checked(
    names: list[str], key: str, sink: _Sink, line: Any, *, servers: set[str], strict: bool,
    deny: bool = False,
) -> ToolCheck:  # fmt: skip
    """``names`` checked against the known tools; notes are warnings, problems errors when
    ``strict``."""
    check = check_tool_names(names, servers, deny=deny)
    for note in check.notes:
        sink.add(line(key), "warning", note)
    if strict:
        for message in check.messages:
            sink.add(line(key), "error", message)
    return check


def _allowed_tools(
    raw: Any, sink: _Sink, line: Any, values: dict[str, Any], *, servers: set[str],
    strict: bool,
) -> None:  # fmt: skip
    names = _split_names(raw, "tools", sink, line)
    if names == ["*"]:  # every tool, as no list; kept for the export
        values["claude_tools"] = names
    if names is None or names == ["*"]:
        return
    written = names
    names, spawn = split_spawn_entries(names)
    if spawn is not None:
        values["subagents"] = spawn
    check = _checked(names, "tools", sink, line, servers=servers, strict=strict)
    if not strict and check.unavailable:
        _report_unavailable(check.unavailable, sink, line("tools"))
    values["tools"] = check.tools
    values["unavailable_tools"] = check.unavailable
    default = [claude_name(t) for t in check.tools] + check.unavailable
    # A Claude Code file's entries are kept as written for the export (`agent` stays
    # `agent`); a personae file's are written in Claude Code's names, but for the spawn
    # entries and the tools personae does not provide. None: what the export writes anyway.
    keep = [*check.unavailable, *(n for n in written if n not in names)]
    values["claude_tools"] = claude_spelling(written, default, keep if strict else written)
    if not strict and (isinstance(raw, list) or raw != ", ".join(written)):
        values["tools_as_written"] = raw  # a Claude Code file's spelling, for the export


def _disallowed_tools(
    raw: Any, key: str, sink: _Sink, line: Any, values: dict[str, Any], *,
    servers: set[str], strict: bool,
) -> None:  # fmt: skip
    names = _split_names(raw, key, sink, line)
    if names is None:
        return
    check = _checked(names, key, sink, line, servers=servers, strict=strict, deny=True)
    # Denying a tool personae does not have is harmless: keep every name.
    denied = list(check.tools)
    denied += [n for n in check.unavailable if n not in denied]
    values["disallowed_tools"] = denied
    default = [claude_name(t) for t in denied]
    values["claude_disallowed_tools"] = claude_spelling(names, default, ())


def _scalars(meta: dict[str, Any], sink: _Sink, line: Any, values: dict[str, Any]) -> None:
    """``model``, ``max_steps``, ``profile``, ``needs_temp_workspace`` and ``skills``."""
    if meta.get("model") is not None:
        if isinstance(meta["model"], str):
            values["model"] = meta["model"].strip()
        else:
            sink.add(line("model"), "error", "model must be a string")
    key = _pick(meta, sink, line, "max_steps", "maxTurns")
    if key is not None and meta[key] is not None:
        steps = meta[key]
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            sink.add(line(key), "error", f"{key} must be a whole number >= 1, got {steps!r}")
        else:
            values["max_steps"] = steps
    if meta.get("profile") is not None:
        name = meta["profile"]
        if isinstance(name, str) and re.fullmatch(r"[a-z][a-z0-9_]*", name.strip()):
            values["profile"] = name.strip()
        else:
            sink.add(line("profile"), "error", f"profile must be a profile name, got {name!r}")
    if "needs_temp_workspace" in meta:
        flag = meta["needs_temp_workspace"]
        if isinstance(flag, bool):
            values["needs_temp_workspace"] = flag
        else:
            sink.add(
                line("needs_temp_workspace"), "error", "needs_temp_workspace must be true or false"
            )
    if meta.get("skills") is not None:
        try:
            values["skills"] = split_names(meta["skills"])
        except ValueError as exc:
            sink.add(line("skills"), "error", f"skills {exc}")


def _modes(
    meta: dict[str, Any], sink: _Sink, line: Any, values: dict[str, Any], strict: bool
) -> None:
    """``context``, ``constraints``, ``sandbox`` and ``version``."""
    if meta.get("context") is not None:
        mode = str(meta["context"]).strip()
        valid = [m.value for m in ContextMode]
        if mode in valid:
            values["context"] = ContextMode(mode)
        else:
            hint = closest_name(mode, valid)
            close = f"; did you mean {hint!r}?" if hint else ""
            sink.add(
                line("context"),
                "error" if strict else "warning",
                f"unknown context mode {mode!r}{close} (valid: {', '.join(valid)})",
            )
    if meta.get("constraints") is not None:
        try:
            values["constraints"] = parse_constraints(meta["constraints"])
        except ValueError as exc:
            sink.add(line("constraints"), "error", str(exc))
    if meta.get("sandbox") is not None:
        try:
            values["sandbox"] = SandboxGrant.model_validate(meta["sandbox"])
        except ValidationError as exc:
            message, where = first_validation_error(exc)
            label = f"sandbox.{where}" if where else "sandbox"
            sink.add(line("sandbox"), "error", f"{label}: {message}")
    if meta.get("version") is not None:
        version = meta["version"]
        if isinstance(version, str | int | float) and not isinstance(version, bool):
            values["version"] = str(version)
        else:
            sink.add(line("version"), "error", "version must be a string")


def _body_after_frontmatter(text: str) -> str:
    """The text after a closing ``---`` line (all of it when there is none)."""
    lines = text.splitlines(keepends=True)
    if lines and lines[0].strip() == "---":
        for index in range(1, len(lines)):
            if lines[index].rstrip() in ("---", "..."):
                return "".join(lines[index + 1 :]).lstrip("\r\n")
    return text


def _parse(text: str, path: Path, kind: PersonaFileKind, sink: _Sink) -> Document | None:
    """The file's document (leniently read unless a personae file); ``None`` when it cannot
    load. Claude Code loads every Markdown file of a plugin's ``agents/`` folder: with no
    frontmatter, or one that does not parse even leniently, it is named by its file."""
    strict = kind is PersonaFileKind.PERSONAE
    try:
        return parse_document(text, lenient=not strict)
    except FrontmatterError as exc:
        if kind is PersonaFileKind.PLUGIN:
            sink.add(
                exc.line, "warning",
                f"{exc.message}; loaded as Claude Code loads a plugin agent: named "
                f"{path.stem!r} by its file, no other field read",
            )  # fmt: skip
            return Document(meta={}, body=_body_after_frontmatter(text))
        if exc.missing and not strict:
            # Claude Code skips Markdown files without frontmatter in agent folders.
            sink.add(exc.line, "warning", f"{exc.message}; not an agent file, skipped")
        else:
            sink.add(exc.line, "error", exc.message)
        return None


def _plugin_defaults(meta: dict[str, Any], path: Path) -> None:
    """Claude Code names a plugin agent without a ``name`` by its file, and loads it
    without a ``description`` (its name stands in for one here)."""
    meta.setdefault("name", path.stem)
    name = meta["name"]
    meta.setdefault("description", name if isinstance(name, str) else path.stem)
