"""Which tools a persona's ``tools`` and ``disallowedTools`` lists grant, by name.

One reading for every narrowing (the team runtime, the sub-agent spawner, the cast's spawn
listing, the pydantic-ai and OpenAI Agents integrations). Names only: it loads no tool and
no pydantic-ai, so the persona layer can ask it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from personae.tools.names import (
    MCP_TOOL_NAME,
    canonical_tool_name,
    mcp_entry_covers,
    split_tool_spec,
)

__all__ = ["ToolLists", "effective_tool_names", "unavailable_tool_names"]


class ToolLists(Protocol):
    """What the name functions read of a persona (a :class:`~personae.persona.model.Persona`)."""

    @property
    def tools(self) -> Sequence[str] | None:
        """Allowed tool entries as written (``None``: every tool)."""

    @property
    def disallowed_tools(self) -> Sequence[str]:
        """Denied tool entries as written."""


def effective_tool_names(persona: ToolLists, available: Iterable[str]) -> list[str]:
    """The tools ``persona`` gets: ``available`` ones named in its list, minus its disallowed.

    ``persona.tools is None`` means every available tool. Claude Code names are
    mapped (``Read`` -> ``read_file``). Names that are not available (a web
    search backend, an unconfigured ``mcp__server__tool``) are left out; so is
    an allowed entry restricted by a pattern such as ``Bash(git:*)``, since
    personae cannot enforce the pattern (fail closed). A disallowed entry with a
    pattern removes the whole tool.
    """
    avail = {canonical_tool_name(n) for n in available}
    denied = {split_tool_spec(spec)[0] for spec in persona.disallowed_tools}
    if persona.tools is None:
        return sorted(n for n in avail if not _listed(denied, n))
    wanted = set()
    for spec in persona.tools:
        name, pattern = split_tool_spec(spec)
        if pattern is None:
            wanted.add(name)
    return sorted(n for n in avail if _listed(wanted, n) and not _listed(denied, n))


def _listed(entries: set[str], name: str) -> bool:
    """Whether tool ``name`` is in tools-list ``entries``: by name, or (an MCP tool) by a
    whole-server entry such as ``mcp__github``, as the team runtime reads them."""
    if name in entries:
        return True
    match = MCP_TOOL_NAME.match(name)
    return (
        match is not None
        and match.group("tool") is not None
        and any(mcp_entry_covers(e, match.group("server"), match.group("tool")) for e in entries)
    )


def unavailable_tool_names(persona: ToolLists, available: Iterable[str]) -> list[str]:
    """Entries of ``persona.tools`` (as written) that :func:`effective_tool_names` leaves out.

    For ``check`` warnings: each is either a tool personae does not provide here
    or a pattern-restricted entry. Disallowed tools are not listed.
    """
    if persona.tools is None:
        return []
    avail = {canonical_tool_name(n) for n in available}
    denied = {split_tool_spec(spec)[0] for spec in persona.disallowed_tools}
    missing: list[str] = []
    for spec in persona.tools:
        name, pattern = split_tool_spec(spec)
        if name in denied:
            continue
        if (pattern is not None or name not in avail) and spec not in missing:
            missing.append(spec)
    return missing
