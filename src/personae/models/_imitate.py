"""How the scripted server imitates a real server's answers (``server:`` in a scenario).

What each server tells about its window, and what it refuses, as the real ones do:
llama.cpp's ``llama-server`` has ``/props``; vLLM lists ``max_model_len``; Ollama answers
``/api/show``; llama-cpp-python tells nothing (``owned_by: me``), refuses a prompt over
its window with "This model's maximum context length is ..." and refuses (HTTP 500)
``content: null`` on assistant turns and the ``json_schema`` response format, and sends
no usage in a streamed answer (``stream_options`` is not read).
"""

from __future__ import annotations

import json
from typing import Any

from personae.models.scenario import ServerImitation

__all__ = ["listed_model", "props", "refusal", "show", "streams_usage"]


def listed_model(server: ServerImitation | None, name: str) -> dict[str, Any]:
    """The ``/v1/models`` row of the model."""
    if server is None:
        return {"id": name, "object": "model", "owned_by": "scripted"}
    row: dict[str, Any] = {"id": name, "object": "model", "owned_by": "me"}
    if server.kind == "vllm":
        row |= {"owned_by": "vllm", "max_model_len": server.window}
    elif server.kind == "ollama":
        row["owned_by"] = "library"
    elif server.kind == "llama.cpp":
        row["owned_by"] = "llamacpp"
    return row


def props(server: ServerImitation | None) -> dict[str, Any] | None:
    """``GET /props`` (llama.cpp's server only)."""
    if server is None or server.kind != "llama.cpp":
        return None
    return {"default_generation_settings": {"n_ctx": server.window}, "total_slots": 1}


def show(server: ServerImitation | None) -> dict[str, Any] | None:
    """``POST /api/show`` (Ollama only)."""
    if server is None or server.kind != "ollama":
        return None
    return {"model_info": {"llama.context_length": server.window}, "parameters": ""}


def streams_usage(server: ServerImitation | None) -> bool:
    """Whether a streamed answer ends with the usage (``stream_options.include_usage``)."""
    return server is None or server.kind != "llama-cpp-python"


def _error(status: int, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": "invalid_request_error"}}


def refusal(
    server: ServerImitation | None, body: dict[str, Any]
) -> tuple[int, dict[str, Any]] | None:
    """The error the imitated server answers ``body`` with, else ``None``."""
    if server is None:
        return None
    messages = body.get("messages") or []
    if server.kind == "llama-cpp-python":
        for n, message in enumerate(messages):
            if message.get("role") == "assistant" and message.get("content") is None:
                return _error(500, f"messages.{n}.content: Input should be a valid string")
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return _error(500, "response_format.type: Input should be 'text' or 'json_object'")
    prompt = len(json.dumps(messages)) // 4
    asked = int(body.get("max_tokens") or 0)
    if prompt >= server.window or (server.kind == "vllm" and prompt + asked > server.window):
        if server.kind == "llama.cpp":
            return _error(
                400,
                f"the request exceeds the available context size, try increasing "
                f"it (n_prompt_tokens={prompt}, n_ctx={server.window})",
            )
        return _error(
            400,
            f"This model's maximum context length is {server.window} tokens. "
            f"However, you requested {prompt + asked} tokens ({prompt} in the "
            f"messages, {asked} in the completion).",
        )
    return None
