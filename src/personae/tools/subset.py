"""Narrow-only tool subsets, enforced at dispatch, with a call log.

A subset is what one agent may call. A child's subset is cut from its
parent's with :meth:`ToolSubset.narrow` (an intersection: it never widens) and
shares the parent's tool instances. :meth:`ToolSubset.dispatch` refuses any
tool outside the subset, whatever the model asks for, so the restriction does
not depend on what the prompt says.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from personae.errors import ToolError, UnknownNameError
from personae.tools.base import Tool, ToolContext, ToolLimits
from personae.tools.canonical import canonical_args
from personae.tools.names import BUILTIN_TOOL_NAMES, canonical_tool_name, split_tool_spec
from personae.tools.workspace import Workspace

if TYPE_CHECKING:
    from personae.persona.model import Persona
    from personae.tools.registry import ToolRegistry

__all__ = [
    "ToolCallRecord",
    "ToolRefusedError",
    "ToolSubset",
    "effective_tool_names",
    "split_tool_spec",
    "unavailable_tool_names",
]


class ToolRefusedError(ToolError):
    """A call to a tool outside the caller's subset."""


@dataclass(frozen=True, kw_only=True)
class ToolCallRecord:
    """One dispatched call, as the team runtime needs it for a worker's result."""

    tool: str
    """Tool name the model used."""
    args: dict[str, Any]
    """Arguments as given."""
    canonical_args: str
    """:func:`~personae.tools.canonical.canonical_args` of ``args`` (for loop detection)."""
    ok: bool
    """Whether the call succeeded."""
    result_preview: str
    """Start of the result (or of the error message)."""
    error: str | None = None
    """The full error message when the call failed."""
    refused: bool = False
    """The tool was outside the subset (never ran)."""
    duration_s: float = 0.0
    """Wall-clock seconds the call took."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the record."""
        return {
            "tool": self.tool,
            "args": self.args,
            "canonical_args": self.canonical_args,
            "ok": self.ok,
            "result_preview": self.result_preview,
            "error": self.error,
            "refused": self.refused,
            "duration_s": round(self.duration_s, 6),
        }


OnCall = Callable[[ToolCallRecord], None]


def _preview(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


class ToolSubset:
    """The tools one agent may call, the workspace they act on, and a log of calls."""

    def __init__(
        self,
        tools: Mapping[str, Tool[Any]],
        *,
        registry: ToolRegistry,
        workspace: Workspace,
        on_call: OnCall | None = None,
        dropped: Iterable[str] = (),
        limits: ToolLimits | None = None,
    ) -> None:
        self._tools = dict(sorted(tools.items()))
        self._limits = limits
        self.registry = registry
        """The registry the subset was cut from (the universe of known names)."""
        self.workspace = workspace
        """Workspace the tools act on."""
        self.on_call = on_call
        """Called with a :class:`ToolCallRecord` after every dispatch."""
        self.dropped: tuple[str, ...] = tuple(dropped)
        """Names asked for when this subset was narrowed that the parent did not have."""
        self.calls: list[ToolCallRecord] = []
        """Every call dispatched through this subset, in order."""

    @classmethod
    def from_registry(
        cls,
        registry: ToolRegistry,
        names: Iterable[str] | None = None,
        *,
        on_call: OnCall | None = None,
    ) -> ToolSubset:
        """The registry's tools named in ``names`` (``None`` = all); unknown names raise."""
        if names is None:
            tools = {t.name: t for t in registry}
        else:
            tools = {}
            for name in names:
                tool = registry.get(name)  # UnknownNameError with the closest name
                tools[tool.name] = tool
        return cls(tools, registry=registry, workspace=registry.workspace, on_call=on_call)

    @property
    def names(self) -> tuple[str, ...]:
        """Tool names in the subset, sorted."""
        return tuple(self._tools)

    @property
    def limits(self) -> ToolLimits:
        """Caps the tools apply (the registry's unless :meth:`with_limits` set others)."""
        return self._limits if self._limits is not None else self.registry.limits

    @property
    def tools(self) -> list[Tool[Any]]:
        """The tool instances, sorted by name (shared with the parent and registry)."""
        return list(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and canonical_tool_name(name) in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolSubset({list(self._tools)!r}, workspace={self.workspace!r})"

    def get(self, name: str) -> Tool[Any]:
        """The tool ``name`` if it is in the subset; refused otherwise."""
        tool = self._tools.get(canonical_tool_name(name))
        if tool is None:
            raise self._refusal(name)
        return tool

    def narrow(self, names: Iterable[str] | None, *, on_call: OnCall | None = None) -> ToolSubset:
        """A child subset: this subset intersected with ``names`` (``None`` = all of it).

        It never widens: a known name this subset lacks is not granted and is
        listed in the child's :attr:`dropped`. A name the registry has never
        heard of raises :class:`UnknownNameError` naming the closest. The child
        shares the tool instances and workspace and starts an empty call log.
        """
        if names is None:
            return ToolSubset(
                self._tools,
                registry=self.registry,
                workspace=self.workspace,
                on_call=on_call,
                limits=self._limits,
            )
        known = set(self.registry.names()) | BUILTIN_TOOL_NAMES
        kept: dict[str, Tool[Any]] = {}
        dropped: list[str] = []
        for raw in names:
            name = canonical_tool_name(raw)
            if name not in known:
                raise UnknownNameError("tool", raw, known)
            if name in self._tools:
                kept[name] = self._tools[name]
            elif name not in dropped:
                dropped.append(name)
        return ToolSubset(
            kept,
            registry=self.registry,
            workspace=self.workspace,
            on_call=on_call,
            dropped=dropped,
            limits=self._limits,
        )

    def with_workspace(self, workspace: Workspace) -> ToolSubset:
        """The same tools (same instances) acting on ``workspace`` instead; fresh call log."""
        return ToolSubset(
            self._tools,
            registry=self.registry,
            workspace=workspace,
            on_call=self.on_call,
            dropped=self.dropped,
            limits=self._limits,
        )

    def with_limits(self, limits: ToolLimits) -> ToolSubset:
        """The same tools (same instances) applying ``limits`` instead; fresh call log."""
        return ToolSubset(
            self._tools,
            registry=self.registry,
            workspace=self.workspace,
            on_call=self.on_call,
            dropped=self.dropped,
            limits=limits,
        )

    def _refusal(self, name: str) -> ToolRefusedError:
        allowed = ", ".join(self._tools) or "(none)"
        return ToolRefusedError(
            str(name), f"tool {name!r} is not available to this agent (allowed: {allowed})"
        )

    async def dispatch(self, name: str, args: Mapping[str, Any] | None = None) -> str:
        """Run tool ``name`` with ``args`` if it is in the subset.

        Returns the tool's text result. Raises :class:`ToolRefusedError` for a
        tool outside the subset and :class:`ToolError` for any failure (an
        unexpected exception inside a tool is wrapped, never propagated raw).
        Every call, refused or not, is appended to :attr:`calls` and passed to
        :attr:`on_call`.
        """
        started = time.monotonic()
        given = dict(args) if isinstance(args, Mapping) else {}
        try:
            canonical = canonical_args(given)
        except (TypeError, ValueError):
            canonical = repr(given)
        tool = self._tools.get(canonical_tool_name(name)) if isinstance(name, str) else None
        try:
            if tool is None:
                raise self._refusal(str(name))
            ctx = ToolContext(workspace=self.workspace, limits=self.limits, tool=tool.name)
            try:
                result = await tool.run(args, ctx)
            except ToolError:
                raise
            except Exception as exc:  # a bug or OS error inside a tool: report, don't crash
                raise ToolError(tool.name, f"failed: {type(exc).__name__}: {exc}") from exc
        except ToolError as exc:
            self._record(
                ToolCallRecord(
                    tool=str(name),
                    args=given,
                    canonical_args=canonical,
                    ok=False,
                    result_preview=_preview(exc.message, self.limits.preview_chars),
                    error=exc.message,
                    refused=isinstance(exc, ToolRefusedError),
                    duration_s=time.monotonic() - started,
                )
            )
            raise
        self._record(
            ToolCallRecord(
                tool=tool.name,
                args=given,
                canonical_args=canonical,
                ok=True,
                result_preview=_preview(result, self.limits.preview_chars),
                duration_s=time.monotonic() - started,
            )
        )
        return result

    def _record(self, record: ToolCallRecord) -> None:
        self.calls.append(record)
        if self.on_call is not None:
            self.on_call(record)

    @property
    def failed_calls(self) -> list[ToolCallRecord]:
        """Calls that failed or were refused."""
        return [c for c in self.calls if not c.ok]

    @property
    def tools_used(self) -> list[str]:
        """Names of tools that ran (successfully or not), in first-use order."""
        seen: dict[str, None] = {}
        for call in self.calls:
            if not call.refused:
                seen.setdefault(call.tool, None)
        return list(seen)


def effective_tool_names(persona: Persona, available: Iterable[str]) -> list[str]:
    """The tools ``persona`` gets: ``available`` ones named in its list, minus its disallowed.

    ``persona.tools is None`` means every available tool. Claude Code names are
    mapped (``Read`` -> ``read_file``). Names that are not available (a web
    search backend, an unconfigured ``mcp__server__tool``) are left out; so is
    an allowed entry restricted by a pattern such as ``Bash(git:*)``, since
    personae cannot enforce the pattern (fail closed). A disallowed entry with a
    pattern removes the whole tool.
    """
    avail = {canonical_tool_name(n) for n in available}
    if persona.tools is None:
        wanted = set(avail)
    else:
        wanted = set()
        for spec in persona.tools:
            name, pattern = split_tool_spec(spec)
            if pattern is None:
                wanted.add(name)
    denied = {split_tool_spec(spec)[0] for spec in persona.disallowed_tools}
    return sorted((wanted & avail) - denied)


def unavailable_tool_names(persona: Persona, available: Iterable[str]) -> list[str]:
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
