"""A toolset wrapper that enforces the allowed names, detects loops and records every call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolCallPart,
)
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from personae.team.loopdetect import LoopDetector, canonical_call
from personae.team.signals import ToolCallRecord

__all__ = ["READ_ONLY_TOOLS", "CallLog", "RecordingToolset", "recording"]

READ_ONLY_TOOLS = frozenset({"read_file", "list_dir", "glob", "grep"})
"""Tools whose identical calls within a turn are answered from the earlier result."""

_KEEP = 2000


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _KEEP else text[:_KEEP] + f"... [{len(text) - _KEEP} more chars]"


@dataclass(kw_only=True)
class CallLog:
    """Calls made by one worker attempt (or one sub-agent run)."""

    calls: list[ToolCallRecord] = field(default_factory=list)
    """Every call, in order."""
    loop_detected: bool = False
    """A repeated identical call was refused."""

    @property
    def failed(self) -> list[ToolCallRecord]:
        """Calls that failed."""
        return [c for c in self.calls if not c.ok]

    @property
    def tools_used(self) -> list[str]:
        """Distinct tools called successfully, first-use order."""
        seen: list[str] = []
        for call in self.calls:
            if call.ok and call.tool not in seen:
                seen.append(call.tool)
        return seen


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
        try:
            value = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except Exception as exc:
            return self._record(name, tool_args, ok=False, result=f"{type(exc).__name__}: {exc}")
        text = _text(value)
        if self.memo is not None:
            if name in READ_ONLY_TOOLS:
                self.memo[key] = text
            else:
                self.memo.clear()  # anything else may change what a read returns
        self._record(name, tool_args, ok=True, result=text)
        return value

    def record_refused(self, messages: list[ModelMessage]) -> None:
        """Record calls the model made to tools it was not offered (pydantic-ai refused them)."""
        calls: dict[str, ToolCallPart] = {}
        for message in messages:
            if isinstance(message, ModelResponse):
                for part in message.parts:
                    if isinstance(part, ToolCallPart):
                        calls[part.tool_call_id] = part
            elif isinstance(message, ModelRequest):
                for rpart in message.parts:
                    unknown = getattr(getattr(rpart, "retry", None), "cause", None)
                    if unknown != "unknown_tool" and not isinstance(rpart, RetryPromptPart):
                        continue
                    call = calls.get(str(getattr(rpart, "tool_call_id", "")))
                    if call is None or call.tool_name in self.allowed:
                        continue
                    if call.tool_name.startswith("final_result"):
                        continue
                    self._record(
                        call.tool_name,
                        call.args_as_dict(),
                        ok=False,
                        result=f"tool {call.tool_name!r} is not available to this persona",
                        refused=True,
                    )

    def _record(
        self,
        name: str,
        args: dict[str, Any],
        *,
        ok: bool,
        result: str,
        reused: bool = False,
        refused: bool = False,
    ) -> str:
        record = ToolCallRecord(
            tool=name,
            args=args,
            ok=ok,
            result=result,
            persona=self.persona,
            reused=reused,
            refused=refused,
        )
        self.log.calls.append(record)
        if self.on_call is not None:
            self.on_call(record)
        return result if ok else f"ERROR: {result}"


def recording(
    toolset: AbstractToolset[Any],
    allowed: set[str] | frozenset[str],
    *,
    persona: str,
    detector: LoopDetector | None = None,
    on_call: Callable[[ToolCallRecord], None] | None = None,
) -> RecordingToolset:
    """Wrap ``toolset`` for one worker attempt or sub-agent run."""
    return RecordingToolset(
        wrapped=toolset,
        allowed=frozenset(allowed),
        persona=persona,
        detector=detector or LoopDetector(),
        on_call=on_call,
    )
