"""A toolset wrapper that enforces the allowed names, detects loops and records every call.

Also the one ``on_call`` that turns a record into a ``tool_call`` event (worker and
sub-agents alike).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from personae.team.events import ToolCalled
from personae.team.hooks import HookGate, ToolOutcome, ToolUse, new_call_id
from personae.team.loopdetect import LoopDetector, canonical_call
from personae.team.runtime import Runtime
from personae.team.turn_context import TurnContext
from personae.tools.adapter import refused_tool_calls
from personae.tools.records import CallLog, ToolCallRecord, shorten

__all__ = ["READ_ONLY_TOOLS", "RecordingToolset", "tool_call_emitter"]

READ_ONLY_TOOLS = frozenset({"read_file", "list_dir", "glob", "grep"})
"""Tools whose identical calls within a turn are answered from the earlier result."""


@dataclass
class RecordingToolset(WrapperToolset[Any]):
    """Wraps a toolset: only ``allowed`` names run; repeats are loops; all calls are logged.

    The allowed names are enforced here, at dispatch, not only by what the
    model is shown. A failing tool returns its error to the model as the tool
    result and is recorded as failed.
    """

    allowed: frozenset[str] = frozenset()
    persona: str = ""
    log: CallLog = field(default_factory=CallLog)
    detector: LoopDetector = field(default_factory=LoopDetector)
    on_call: Callable[[ToolCallRecord], None] | None = None
    memo: dict[str, str] | None = None
    """Results of read-only calls made earlier in the turn (shared across subtasks)."""
    gate: HookGate | None = None
    """The run's hooks, asked before and after each call (they may veto it)."""
    subtask: int | None = None
    """The subtask the calls work on (what the hooks are told)."""
    depth: int | None = None
    """``None`` for a worker, else the sub-agent's depth (what the hooks are told)."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await self.wrapped.get_tools(ctx)
        return {name: tool for name, tool in tools.items() if name in self.allowed}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if name not in self.allowed:
            return self._record(
                name,
                tool_args,
                ok=False,
                result=f"tool {name!r} is not allowed for this persona",
                refused=True,
            )
        use = self._use(name, tool_args, ctx)
        if use is not None and self.gate is not None:
            veto = await self.gate.before_tool(use)
            if veto is not None:
                refusal = f"refused by a hook: {veto.reason}"
                return self._record(name, tool_args, ok=False, result=refusal, refused=True)
        if self.detector.observe(self.persona, name, tool_args):
            self.log.loop_detected = True
            return self._record(
                name,
                tool_args,
                ok=False,
                result="refused: identical call already made; use its earlier result",
            )
        key = canonical_call("", name, tool_args)
        if self.memo is not None and key in self.memo:
            # An identical read made by an earlier subtask: answer from its result.
            note = "(identical call already made earlier in this turn; its result:)\n"
            return self._record(name, tool_args, ok=True, result=note + self.memo[key], reused=True)
        started = time.monotonic()
        try:
            value = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if use is not None and await self._withheld(use, ToolOutcome(ok=False, text=error)):
                error = "result withheld by a hook"
            return self._record(name, tool_args, ok=False, result=error, started=started)
        text = value if isinstance(value, str) else repr(value)
        if use is not None and await self._withheld(use, ToolOutcome(ok=True, text=text)):
            withheld = "result withheld by a hook"
            return self._record(name, tool_args, ok=False, result=withheld, started=started)
        if self.memo is not None:
            if name in READ_ONLY_TOOLS:
                self.memo[key] = shorten(text)
            else:
                self.memo.clear()  # anything else may change what a read returns
        self._record(name, tool_args, ok=True, result=text, started=started)
        return value

    def _use(self, name: str, args: dict[str, Any], ctx: RunContext[Any]) -> ToolUse | None:
        """The call as the hooks see it (``None``: no hooks)."""
        if not self.gate:
            return None
        return ToolUse(
            id=ctx.tool_call_id or new_call_id(), run_id=self.gate.run_id, tool=name,
            args=dict(args), persona=self.persona, subtask=self.subtask, depth=self.depth,
        )  # fmt: skip

    async def _withheld(self, use: ToolUse, outcome: ToolOutcome) -> bool:
        """Whether a hook vetoes the call's result (it then reaches neither model nor run)."""
        return self.gate is not None and await self.gate.after_tool(use, outcome) is not None

    def record_refused(self, messages: list[ModelMessage]) -> None:
        """Record calls the model made to tools it was not offered (pydantic-ai refused them)."""
        for call, _text_told in refused_tool_calls(messages, self.allowed):
            self._record(
                call.tool_name,
                call.args_as_dict(),
                ok=False,
                result=f"tool {call.tool_name!r} is not available to this persona",
                refused=True,
            )

    def _record(
        self, name: str, args: dict[str, Any], *, ok: bool, result: str, **extra: Any
    ) -> str:
        """Log the call (``extra``: ``started``, ``reused``, ``refused``); returns what the
        model is told."""
        record = ToolCallRecord.made(name, args, ok=ok, text=result, persona=self.persona, **extra)
        self.log.add(record, self.on_call)
        return result if ok else f"ERROR: {result}"


def tool_call_emitter(
    runtime: Runtime,
    *,
    subtask: int | None,
    persona: str,
    depth: int | None = None,
    turn: TurnContext | None = None,
) -> Callable[[ToolCallRecord], None]:
    """The ``on_call`` of a worker (``depth`` None) or of a sub-agent at ``depth``.

    Each record becomes a ``tool_call`` event; a worker's successful, not reused
    calls are also added to ``turn`` (the next role sees their results).
    """

    def on_call(record: ToolCallRecord) -> None:
        outcome = "ok" if record.ok else "FAILED"
        if depth is None:
            message = f"{record.tool}({_short_args(record.args)}) {outcome}"
        else:
            message = f"[{persona}] {record.tool} {outcome}"
        runtime.emit(
            ToolCalled(
                message=message,
                subtask=subtask,
                tool=record.tool,
                args=record.args,
                ok=record.ok,
                result=record.result[:500],
                persona=persona,
                reused=record.reused if depth is None else None,
                depth=depth,
            )
        )
        if turn is not None and record.ok and not record.reused:
            turn.add_tool_result(record.tool, record.args, record.result[:800])

    return on_call


def _short_args(args: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) <= 80 else text[:77] + "..."
