"""OpenAI Responses protocol for the scripted server (``POST /v1/responses``).

Codex speaks this API. A Responses request is translated to the
chat-completions shape the scenario player reads (:func:`to_chat`), and the
chat answer back to a Responses object (:func:`from_chat`), plain JSON or the
SSE event sequence (:func:`sse_events`). Free-form ("custom") tools such as
Codex's ``apply_patch`` are answered with ``custom_tool_call`` items whose
``input`` is the scripted call's ``input`` argument. Namespaced tools (Codex
puts each MCP server's tools in one ``namespace`` tool, e.g. ``mcp__personae``)
appear to the scenario flat as ``<namespace>__<tool>`` and are called back
with separate ``namespace`` and ``name`` fields.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

__all__ = ["from_chat", "sse_events", "to_chat"]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _call(item: dict[str, Any], arguments: str) -> dict[str, Any]:
    name = str(item.get("name", ""))
    if item.get("namespace"):
        name = f"{item['namespace']}__{name}"
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ],
    }


def _item_message(item: dict[str, Any]) -> dict[str, Any] | None:
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role", "user")
        return {
            "role": "system" if role == "developer" else role,
            "content": _text_of(item.get("content")),
        }
    if kind == "function_call":
        return _call(item, str(item.get("arguments", "")))
    if kind == "custom_tool_call":
        return _call(item, json.dumps({"input": item.get("input", "")}))
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        text = output if isinstance(output, str) else _text_of(output) or json.dumps(output)
        return {"role": "tool", "tool_call_id": item.get("call_id"), "content": text}
    return None


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions shaped body equivalent to a Responses request."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    raw = body.get("input")
    items = [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) else raw
    for item in items or []:
        if isinstance(item, dict) and (message := _item_message(item)) is not None:
            messages.append(message)
    tools: list[dict[str, Any]] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict) or not tool.get("name"):
            continue
        if tool.get("type") == "namespace":
            # Codex groups each MCP server's tools in one namespace ("mcp__personae");
            # the scenario sees them flat as "<namespace>__<tool>".
            for child in tool.get("tools") or []:
                if isinstance(child, dict) and child.get("name"):
                    flat = f"{tool['name']}__{child['name']}"
                    tools.append(
                        {
                            "type": "function",
                            "function": {"name": flat},
                            "kind": "namespace",
                            "namespace": tool["name"],
                            "child": child["name"],
                        }
                    )
            continue
        tools.append(
            {"type": "function", "function": {"name": tool["name"]}, "kind": tool.get("type")}
        )
    return {"messages": messages, "tools": tools, "stream": bool(body.get("stream"))}


def _output_item(
    call: dict[str, Any], custom: set[str], spaced: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    function = call["function"]
    call_id = "call_" + uuid.uuid4().hex[:20]
    if function["name"] in spaced:
        namespace, child = spaced[function["name"]]
        return {
            "type": "function_call",
            "id": "fc_" + uuid.uuid4().hex[:20],
            "call_id": call_id,
            "namespace": namespace,
            "name": child,
            "arguments": function["arguments"],
            "status": "completed",
        }
    if function["name"] in custom:
        args = json.loads(function["arguments"] or "{}")
        return {
            "type": "custom_tool_call",
            "id": "ctc_" + uuid.uuid4().hex[:20],
            "call_id": call_id,
            "name": function["name"],
            "input": str(args.get("input", "")),
            "status": "completed",
        }
    return {
        "type": "function_call",
        "id": "fc_" + uuid.uuid4().hex[:20],
        "call_id": call_id,
        "name": function["name"],
        "arguments": function["arguments"],
        "status": "completed",
    }


def from_chat(payload: dict[str, Any], chat_body: dict[str, Any], model: str) -> dict[str, Any]:
    """A Responses object for a chat-completions payload from the scripted server."""
    message = payload["choices"][0]["message"]
    tools = chat_body.get("tools", [])
    custom = {t["function"]["name"] for t in tools if t.get("kind") == "custom"}
    spaced = {
        t["function"]["name"]: (t["namespace"], t["child"])
        for t in tools
        if t.get("kind") == "namespace"
    }
    output: list[dict[str, Any]] = []
    if message.get("content"):
        output.append(
            {
                "type": "message",
                "id": "msg_" + uuid.uuid4().hex[:20],
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": message["content"], "annotations": []}],
            }
        )
    output += [_output_item(c, custom, spaced) for c in message.get("tool_calls") or []]
    usage = payload.get("usage", {})
    inp, out = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    return {
        "id": "resp_" + uuid.uuid4().hex[:20],
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inp + out,
        },
    }


def sse_events(response: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event, data)`` stream equivalent to a Responses object."""
    pending = {**response, "status": "in_progress", "output": []}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": pending}),
        ("response.in_progress", {"type": "response.in_progress", "response": pending}),
    ]
    for index, item in enumerate(response["output"]):
        events.append(
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": item},
            )
        )
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": text,
                    },
                )
            )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    events.append(("response.completed", {"type": "response.completed", "response": response}))
    for seq, (_, data) in enumerate(events):
        data["sequence_number"] = seq
    return events
