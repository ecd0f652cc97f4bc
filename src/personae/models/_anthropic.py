"""Anthropic Messages protocol for the scripted server (``POST /v1/messages``).

The scenario player works on chat-completions shaped bodies, so a Messages
request is translated to that shape (:func:`to_chat`) and the chat answer back
to a Messages response (:func:`from_chat`), plain JSON or the SSE event
sequence Claude Code and the Anthropic SDK read (:func:`sse_events`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from personae.models import _served
from personae.models._pieces import text_pieces

__all__ = ["count_tokens_reply", "error_payload", "from_chat", "sse_events", "to_chat"]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") == "tool_reference":
                parts.append(str(block.get("tool_name", "")))
        return "\n".join(parts)
    return ""


def _user_messages(content: Any) -> list[dict[str, Any]]:
    """One Anthropic user turn -> chat ``tool`` messages (tool results) then a ``user`` one."""
    if not isinstance(content, list):
        return [{"role": "user", "content": _text_of(content)}]
    out: list[dict[str, Any]] = []
    texts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            text = _text_of(block.get("content"))
            if block.get("is_error"):
                text = f"[tool error] {text}"
            out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text})
        elif block.get("type") == "text":
            texts.append(str(block.get("text", "")))
    if texts:
        out.append({"role": "user", "content": "\n".join(texts)})
    return out


def _assistant_message(content: Any) -> dict[str, Any]:
    if not isinstance(content, list):
        return {"role": "assistant", "content": _text_of(content)}
    calls = [
        {
            "id": b.get("id"),
            "type": "function",
            "function": {"name": b.get("name", ""), "arguments": json.dumps(b.get("input", {}))},
        }
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": _text_of(content)}
    if calls:
        message["tool_calls"] = calls
    return message


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions shaped body equivalent to a Messages request."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _text_of(system)})
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            messages.append(_assistant_message(message.get("content")))
        else:
            messages.extend(_user_messages(message.get("content")))
    tools = [
        {"type": "function", "function": {"name": t.get("name", "")}}
        for t in body.get("tools") or []
        if isinstance(t, dict)
    ]
    return {"messages": messages, "tools": tools, "stream": bool(body.get("stream"))}


def from_chat(payload: dict[str, Any], model: str) -> dict[str, Any]:
    """A Messages response for a chat-completions payload from the scripted server."""
    message = payload["choices"][0]["message"]
    content: list[dict[str, Any]] = []
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call["function"]
        content.append(
            {
                "type": "tool_use",
                "id": "toolu_" + uuid.uuid4().hex[:20],
                "name": function["name"],
                "input": json.loads(function["arguments"] or "{}"),
            }
        )
    usage = payload.get("usage", {})
    return {
        "id": "msg_" + uuid.uuid4().hex[:20],
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if message.get("tool_calls") else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": int(usage.get("prompt_tokens", 0)),
            "output_tokens": int(usage.get("completion_tokens", 0)),
        },
    }


def sse_events(response: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event, data)`` stream equivalent to a Messages ``response``."""
    start = {**response, "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": response["usage"]["input_tokens"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(response["content"]):
        if block["type"] == "text":  # word by word, so clients see real text deltas
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas: list[dict[str, Any]] = [
                {"type": "text_delta", "text": piece} for piece in text_pieces(block["text"])
            ]
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": response["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": response["usage"]["output_tokens"]},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def error_payload(message: str, *, status: int) -> dict[str, Any]:
    """An Anthropic-style error body."""
    kind = {400: "invalid_request_error", 404: "not_found_error", 429: "rate_limit_error"}
    return {"type": "error", "error": {"type": kind.get(status, "api_error"), "message": message}}


def count_tokens_reply(body: dict[str, Any]) -> dict[str, Any]:
    """``/v1/messages/count_tokens``: the request counted as a message to it would be
    (:func:`personae.models._served.prompt_tokens` of its chat form)."""
    return {"input_tokens": _served.prompt_tokens(to_chat(body))}
