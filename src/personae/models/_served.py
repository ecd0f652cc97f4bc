"""The usage the scripted replay server reports: counted from what it received, as a real
server counts it.

A real OpenAI-compatible server tokenizes the chat request it was sent (each message's
role and text, the tool calls' names and arguments, the tool definitions) with its
model's tokenizer and adds a few tokens of chat framing per message. The scripted
server does the same with the public ``o200k_base`` tokenizer and OpenAI's published
framing (:data:`PER_MESSAGE` per message, :data:`PRIMING` for the answer's start), so
the figure it reports is a real tokenizer's count of the real request, never a
character ratio. ``runs show`` sets ours beside it: the difference is the drift of our
own count, not an artefact of the server.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from personae.tokens.exact import exact_counter

__all__ = ["PER_MESSAGE", "PRIMING", "SERVED_ENCODING", "completion_tokens", "prompt_tokens"]

SERVED_ENCODING: Final = "o200k_base"
"""The tokenizer the scripted server counts with."""
PER_MESSAGE: Final = 3
"""Chat framing tokens per message (OpenAI's published figure for its chat format)."""
PRIMING: Final = 3
"""Tokens that start the assistant's answer."""


def _texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):  # content parts: their text
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                yield part["text"]


def _message_texts(message: Mapping[str, Any]) -> Iterable[str]:
    yield str(message.get("role") or "")
    yield from _texts(message.get("content"))
    if isinstance(message.get("name"), str):
        yield message["name"]
    for call in message.get("tool_calls") or []:
        function = (call.get("function") or {}) if isinstance(call, Mapping) else {}
        yield str(function.get("name") or "")
        yield str(function.get("arguments") or "")


def _tool_texts(tools: Any) -> Iterable[str]:
    for tool in tools or []:
        function = tool.get("function", tool) if isinstance(tool, Mapping) else {}
        yield json.dumps(function, sort_keys=True, ensure_ascii=False)


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """Input tokens of a chat-completions request ``body`` as a server counts them."""
    count = exact_counter(SERVED_ENCODING).count
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    total = PRIMING + PER_MESSAGE * len(messages)
    total += sum(count(t) for m in messages for t in _message_texts(m) if t)
    return total + sum(count(t) for t in _tool_texts(body.get("tools")))


def completion_tokens(message: Mapping[str, Any]) -> int:
    """Output tokens of the answer ``message`` (its text and tool calls)."""
    count = exact_counter(SERVED_ENCODING).count
    return sum(count(t) for t in _message_texts({**message, "role": ""}) if t)
