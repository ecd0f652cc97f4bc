"""Our token count of a whole model request, to store next to what the provider reported.

The budget report counts the assembled context; a request also carries the message
history of the agent's steps (tool calls and results), the tool definitions and the chat
format's per-message framing. This counts all of it with our counter, so ``runs show``
can put our figure next to the provider's ``input_tokens`` and show the drift.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from personae.tokens.base import TokenCounter

__all__ = ["MESSAGE_FRAMING", "count_request"]

MESSAGE_FRAMING = 4
"""Tokens the chat format adds around each message (role and separators; OpenAI's figure)."""


def _part_text(part: Any) -> str:
    if hasattr(part, "args_as_json_str"):  # a tool call: name and arguments
        return f"{getattr(part, 'tool_name', '')} {part.args_as_json_str()}"
    if hasattr(part, "model_response_str"):  # a tool result
        return str(part.model_response_str())
    if hasattr(part, "model_response"):  # a retry prompt
        return str(part.model_response())
    content = getattr(part, "content", None)
    if isinstance(content, str):
        return content
    return json.dumps(content, default=str) if content is not None else ""


def _tool_texts(params: Any) -> Iterable[str]:
    for attr in ("function_tools", "output_tools"):
        for tool in getattr(params, attr, None) or ():
            yield (
                f"{tool.name} {tool.description or ''} "
                f"{json.dumps(tool.parameters_json_schema, sort_keys=True)}"
            )


def count_request(messages: Sequence[Any], params: Any, counter: TokenCounter) -> int:
    """Tokens of every message part and tool definition in one request, by ``counter``."""
    texts: list[str] = []
    framing = 0
    for message in messages:
        parts = getattr(message, "parts", ())
        texts.extend(_part_text(p) for p in parts)
        framing += MESSAGE_FRAMING * max(1, len(parts))
    texts.extend(_tool_texts(params))
    return framing + sum(counter.count(t) for t in texts if t)
