"""A model call in progress, as a live view sees it: the tokens streamed so far.

A call streams whenever its model can. Every piece that arrives (answer text, a tool
call's arguments, thinking) is kept; at most every :data:`PROGRESS_EVERY` seconds a
``call`` event (phase ``tokens``) says how many tokens have arrived so far in this call,
counted by the model's token counter. Answer text also goes to the caller's ``on_text``
(the final answer printed as it is written).

A server that streams without reporting usage (llama-cpp-python sends none in a stream)
still gets its requests counted: :func:`counted_usage` fills in our own count.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    AgentStreamEvent,
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage

from personae.team._request_tokens import count_request
from personae.team.events import CallProgress, Event
from personae.tokens.base import TokenCounter

__all__ = ["PROGRESS_EVERY", "CallStream", "counted_usage"]

PROGRESS_EVERY = 0.25
"""Seconds between two ``tokens`` events of one call (the first piece is shown at once)."""


def _piece(event: AgentStreamEvent) -> tuple[str, bool]:
    """The new text an event carries, and whether it is answer text."""
    if isinstance(event, PartStartEvent):
        part = event.part
        if isinstance(part, TextPart):
            return part.content, True
        if isinstance(part, ThinkingPart):
            return part.content, False
        if isinstance(part, ToolCallPart):
            return f"{part.tool_name} {part.args_as_json_str() if part.args else ''}", False
    elif isinstance(event, PartDeltaEvent):
        delta = event.delta
        if isinstance(delta, TextPartDelta):
            return delta.content_delta, True
        if isinstance(delta, ThinkingPartDelta):
            return delta.content_delta or "", False
        if isinstance(delta, ToolCallPartDelta):
            args = delta.args_delta
            return (args if isinstance(args, str) else str(args or "")), False
    return "", False


@dataclass(kw_only=True)
class CallStream:
    """Counts what one call streams and tells the live view (``call`` events, phase
    ``tokens``)."""

    emit: Callable[[Event], object]
    """Where the progress events go (the run's bus)."""
    start: CallProgress
    """The call's ``start`` event (role, model, cap, timeout)."""
    counter: TokenCounter
    """The model's token counter."""
    on_text: Callable[[str], object] | None = None
    """Gets each piece of answer text as it arrives."""
    started: float = field(default_factory=time.monotonic)
    """When the call started."""
    parts: list[list[str]] = field(default_factory=list)
    """The pieces streamed so far, per part of each response (counted part by part, as
    the answer's usage is when the server reports none)."""
    shown: float = 0.0
    """When the last ``tokens`` event was emitted (``time.monotonic()``; 0: never)."""
    _open: dict[int, list[str]] = field(default_factory=dict)

    def _keep(self, event: AgentStreamEvent, piece: str) -> None:
        index = getattr(event, "index", 0)
        if isinstance(event, PartStartEvent):
            if index in self._open or index == 0:  # a new response
                self._open = {}
            self._open[index] = [piece]
            self.parts.append(self._open[index])
        elif index in self._open:
            self._open[index].append(piece)
        else:  # a delta of a part that did not start with text
            self._open[index] = [piece]
            self.parts.append(self._open[index])

    def tokens(self) -> int:
        """Tokens streamed so far in this call (by the model's counter)."""
        return sum(self.counter.count("".join(part)) for part in self.parts)

    async def handle(self, _: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        """pydantic-ai's event stream handler: keep each piece, show the count now and then."""
        async for event in events:
            piece, is_text = _piece(event)
            if not piece:
                continue
            if is_text and self.on_text is not None:
                self.on_text(piece)
            self._keep(event, piece)
            now = time.monotonic()
            if now - self.shown >= PROGRESS_EVERY:
                self.shown = now
                self.emit(self.progress(now))

    def progress(self, now: float) -> CallProgress:
        """The ``tokens`` event for now."""
        start = self.start
        tokens = self.tokens()
        return CallProgress(
            message=f"{start.role} call to {start.model}: {tokens} tokens so far",
            subtask=start.subtask, phase="tokens", role=start.role, model=start.model,
            max_tokens=start.max_tokens, timeout=start.timeout,
            seconds=round(now - self.started, 3), output_tokens=tokens,
        )  # fmt: skip


def counted_usage(
    response: ModelResponse,
    sent: tuple[Sequence[ModelMessage], ModelRequestParameters | None],
    counter: TokenCounter,
) -> RequestUsage | None:
    """Our count of a request and its answer when the server reported no usage at all
    (``None``: it did, or there was nothing to count)."""
    if response.usage.input_tokens or response.usage.output_tokens:
        return None
    written = [p.content for p in response.parts if isinstance(p, TextPart | ThinkingPart)]
    written += [f"{c.tool_name} {c.args_as_json_str()}" for c in response.tool_calls]
    messages, parameters = sent
    return RequestUsage(
        input_tokens=count_request(messages, parameters, counter),
        output_tokens=sum(counter.count(t) for t in written if t),
    )
