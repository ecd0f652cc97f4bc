"""Load ``SKILL.md`` files per the Agent Skills rules (L1 eagerly; L2/L3 on demand)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from personae.persona._files import read_confined
from personae.persona._frontmatter import Document, FrontmatterError, parse_document
from personae.persona._lineends import has_crlf
from personae.persona._tools import check_tool_names, split_names
from personae.persona.loader import CRLF_NOTE, full_description, parse_constraints
from personae.persona.model import Skill
from personae.persona.problems import LENIENT_GROUP, UNAVAILABLE_GROUP, Problem, Severity
from personae.tools.names import mcp_server_of

__all__ = ["MAX_DESCRIPTION", "MAX_NAME", "SKILL_NAME", "load_skill_file", "skill_from_text"]

SKILL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
"""The Agent Skills name rule."""
MAX_NAME = 64
"""Longest skill name."""
MAX_DESCRIPTION = 1024
"""Longest skill description."""

_KNOWN = frozenset({"name", "description", "allowed-tools", "allowedTools", "constraints"})
_KEPT = frozenset(
    {
        "license",
        "compatibility",
        "metadata",
        "model",
        "disable-model-invocation",
        "user-invocable",
        "argument-hint",
        "context",
        "agent",
        "hooks",
        "version",
        "when_to_use",
    }
)


def load_skill_file(
    path: Path,
    *,
    root: Path,
    problems: list[Problem],
    servers: Iterable[str] = (),
    by_folder: bool = False,
) -> Skill | None:
    """Load one ``SKILL.md``; problems are appended; ``None`` when it cannot load.

    ``by_folder``: a Claude Code skill (``.claude/skills``, a plugin, a ``--dir`` of
    Claude Code files), named by its folder as Claude Code names it (the frontmatter
    ``name`` may be missing, Title Case or another name); personae's own skills follow
    the Agent Skills name rules.
    """
    text = read_confined(path, root, problems)
    if text is None:
        return None
    return skill_from_text(text, path=path, problems=problems, servers=servers, by_folder=by_folder)


class _Report:
    """Appends problems of one skill file (errors unless told otherwise)."""

    def __init__(self, path: Path, problems: list[Problem]) -> None:
        self.path = path
        self.problems = problems

    def __call__(
        self, line: int | None, message: str, severity: Severity = "error",
        group: str | None = None,
    ) -> None:  # fmt: skip
        self.problems.append(
            Problem(
                file=self.path,
                line=line,
                severity=severity,
                message=message,
                group=group,
            )
        )


def skill_from_text(
    text: str,
    *,
    path: Path,
    problems: list[Problem],
    servers: Iterable[str] = (),
    by_folder: bool = False,
) -> Skill | None:
    """Parse ``SKILL.md`` text (only the frontmatter: L1); ``by_folder`` as in
    :func:`load_skill_file`."""
    before = len(problems)
    add = _Report(path, problems)
    try:
        doc = parse_document(text, lenient=True)
    except FrontmatterError as exc:
        add(exc.line, exc.message)
        return None
    if doc.repaired is not None:
        add(
            doc.repaired.line,
            f"{doc.repaired.message}; read leniently (values with YAML special characters "
            "quoted), as Claude Code does",
            "note",
            LENIENT_GROUP,
        )
        if has_crlf(path):
            add(doc.repaired.line, CRLF_NOTE, "warning")
    values: dict[str, Any] = {"path": path}
    if by_folder:
        values["name"] = path.parent.name  # as Claude Code lists and invokes it
    else:
        _name(doc, path, add, values)
    _description(doc, add, values)
    _fields(doc, add, values, servers, claude=by_folder)
    failed = any(p.severity == "error" for p in problems[before:])
    if failed or "name" not in values or "description" not in values:
        return None
    return Skill(**values)


def _name(doc: Document, path: Path, add: _Report, values: dict[str, Any]) -> None:
    """The required ``name`` (Agent Skills rules; it should match the skill's folder)."""
    name, line = doc.meta.get("name"), doc.line_of
    if name is None:
        add(1, "missing required field 'name'")
    elif not isinstance(name, str) or len(name) > MAX_NAME or not SKILL_NAME.match(name):
        add(
            line("name"),
            f"bad skill name {name!r}: lowercase letters, digits and single "
            f"hyphens (^[a-z0-9]+(-[a-z0-9]+)*$), at most {MAX_NAME} chars",
        )
    else:
        values["name"] = name
        if path.parent.name != name:
            add(
                line("name"),
                f"skill name {name!r} differs from its folder {path.parent.name!r}",
                "warning",
            )


def _description(doc: Document, add: _Report, values: dict[str, Any]) -> None:
    """The required ``description`` (over-long or with ``<``/``>``: a warning, kept)."""
    desc, line = doc.meta.get("description"), doc.line_of
    if desc is None or (isinstance(desc, str) and not desc.strip()):
        add(1 if desc is None else line("description"), "missing required field 'description'")
        return
    if not isinstance(desc, str):
        add(line("description"), "description must be a string")
        return
    # Over-long or with '<'/'>' breaks the Agent Skills rules, but Claude Code loads
    # such skills (Anthropic's own claude-api skill is over 1024 chars): warn, load.
    full = full_description(doc, lambda ln, _sev, msg: add(ln, msg, "warning"))
    if len(full) > MAX_DESCRIPTION:
        add(
            line("description"),
            f"description is {len(full)} chars, over the Agent Skills limit of "
            f"{MAX_DESCRIPTION}; loaded as is (some hosts may cut or refuse it)",
            "warning",
        )
    if "<" in full or ">" in full:
        add(
            line("description"),
            "description contains '<' or '>' (the Agent Skills rules forbid them); "
            "loaded as is, escaped wherever personae renders it",
            "warning",
        )
    values["description"] = full


def _fields(
    doc: Document, add: _Report, values: dict[str, Any], servers: Iterable[str], *,
    claude: bool = False,
) -> None:  # fmt: skip
    """``allowed-tools``, ``constraints`` and the unknown fields (kept, with a warning).

    ``claude``: a Claude Code skill, whose ``allowed-tools`` may name Claude Code tools
    personae has no counterpart of (``TodoWrite``): a note, as for a Claude Code agent
    (Claude Code is silent); an MCP server's tool or a pattern stays a warning."""
    meta, line = doc.meta, doc.line_of
    key = "allowed-tools" if "allowed-tools" in meta else "allowedTools"
    if meta.get(key) is not None:
        try:
            names = split_names(meta[key], spaces=True)
        except ValueError as exc:
            add(line(key), f"{key} {exc}")
        else:
            check = check_tool_names(names, servers)
            own = [n for n in check.unavailable if mcp_server_of(n) is None and "(" not in n]
            if claude and own:
                add(line(key), "tools personae does not provide, left out of the skill's "
                    f"allowed tools: {', '.join(own)}", "note", UNAVAILABLE_GROUP)  # fmt: skip
            for name, message in zip(check.unavailable, check.messages, strict=False):
                if not (claude and name in own):
                    add(line(key), message, "warning")
            for message in check.notes:
                add(line(key), message, "warning")
            values["allowed_tools"] = check.tools
    if meta.get("constraints") is not None:
        try:
            values["constraints"] = parse_constraints(meta["constraints"])
        except ValueError as exc:
            add(line("constraints"), str(exc))
    extra = {k: v for k, v in meta.items() if k not in _KNOWN}
    for k in extra:
        if k not in _KEPT:
            add(line(k), f"unknown field {k!r} kept as is (personae ignores it)", "warning")
    values["extra"] = extra
