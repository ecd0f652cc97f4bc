"""How a model is asked for structured output (a plan, a verdict) and how its answer is read.

Three output modes, chosen per provider, model and server (``output_mode`` in a
``models:`` entry of ``.personae/config.yaml`` overrides the choice):

- ``tool``: an output tool the model calls with the object as arguments (strongest on
  hosted APIs that follow tool schemas: OpenAI, Anthropic).
- ``native``: the server constrains decoding to the JSON schema (llama.cpp and
  llama-cpp-python ``response_format`` with a ``schema``, vLLM and Ollama
  ``json_schema``); the schema is also described in the prompt.
- ``prompted``: the schema in the prompt only; the answer is read leniently.

In ``native`` and ``prompted`` mode the answer is read by :func:`extract_json`:
fenced JSON, a ``{"name": ..., "arguments": {...}}`` wrapper, or prose around one
JSON object all parse.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "OUTPUT_MODES",
    "OutputMode",
    "default_output_mode",
    "extract_json",
    "response_format",
    "schema_instructions",
    "wire_schema",
]

OutputMode = Literal["tool", "native", "prompted"]
"""How structured output is asked for."""
OUTPUT_MODES: tuple[str, ...] = get_args(OutputMode)
"""Every output mode, for messages and config checks."""

_NATIVE_SERVERS = frozenset({"llama.cpp", "llama-cpp-python", "vllm", "ollama"})
"""Servers known to constrain decoding to a JSON schema."""


def default_output_mode(provider: str, server: str | None) -> OutputMode:
    """The mode that fits ``provider`` on ``server`` (a server kind from discovery or the
    config; ``None``: not known).

    Hosted OpenAI and Anthropic and the scripted server: an output tool. A local server
    that constrains decoding: native. Any other OpenAI-compatible server: prompted (it
    may follow neither tool schemas nor ``response_format``).
    """
    if server in _NATIVE_SERVERS:
        return "native"
    if provider in ("anthropic", "scripted") or (provider == "openai" and server == "openai"):
        return "tool"
    if server == "scripted":
        return "tool"
    return "prompted"


def response_format(server: str | None, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` request field that makes ``server`` constrain decoding.

    llama-cpp-python refuses OpenAI's ``json_schema`` type (HTTP 500) but takes its own
    ``{"type": "json_object", "schema": ...}``, as llama.cpp's server does; vLLM, Ollama
    and OpenAI take ``json_schema``.
    """
    if server in ("llama.cpp", "llama-cpp-python", "scripted"):
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


def schema_instructions(schema: dict[str, Any]) -> str:
    """The prompt text asking for one JSON object following ``schema``."""
    return (
        "Answer with ONE JSON object only, no other text, following this JSON schema:\n"
        + json.dumps(schema, separators=(",", ":"))
    )


_MAX_ITEMS = 5
"""Most items of any array in a constrained answer (a plan of at most five subtasks)."""
_MAX_LENGTH = 300
"""Longest string in a constrained answer (a small model's runaway string stops here)."""


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``$ref`` to ``#/$defs/...`` replaced by its definition."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("$defs", "title")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _bound(node: Any) -> Any:
    """Bounds on every string and array without one (constrained decoding then stops)."""
    if isinstance(node, dict):
        bounded = {k: _bound(v) for k, v in node.items()}
        if bounded.get("type") == "string" and "enum" not in bounded:
            bounded.setdefault("maxLength", _MAX_LENGTH)
        if bounded.get("type") == "array":
            bounded.setdefault("maxItems", _MAX_ITEMS)
        return bounded
    if isinstance(node, list):
        return [_bound(v) for v in node]
    return node


def wire_schema(output_type: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent for ``output_type``: references inlined, strings and arrays
    bounded, descriptions kept."""
    schema = output_type.model_json_schema()
    return dict(_bound(_inline(schema, schema.get("$defs", {}))))


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _objects(text: str) -> list[Any]:
    """Every JSON value that starts at a ``{`` in ``text`` and decodes, outermost first."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    at = text.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        found.append(value)
        at = text.find("{", end)
    return found


def _unwrap(value: Any, fields: frozenset[str]) -> Any:
    """The object inside a ``{"name": ..., "arguments"|"parameters": {...}}`` wrapper (some
    models print their tool call as text), or inside a one-key envelope such as
    ``{"plan": {...}}``, when the outer object lacks every expected field."""
    for _ in range(3):
        if not isinstance(value, dict) or (fields and fields & value.keys()):
            return value
        inner = value.get("arguments", value.get("parameters"))
        if isinstance(inner, str):
            try:
                inner = json.loads(inner)
            except json.JSONDecodeError:
                return value
        if isinstance(inner, dict):
            value = inner
        elif len(value) == 1 and isinstance(next(iter(value.values())), dict):
            value = next(iter(value.values()))
        else:
            return value
    return value


def extract_json(text: str, fields: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """The one JSON object ``text`` answers with, read leniently; ``None`` when none is there.

    Tried in order: the whole text, fenced blocks, then every object found in the prose.
    ``fields`` (the schema's property names) picks the object that has one of them and
    unwraps tool-call wrappers that do not.
    """
    candidates: list[Any] = []
    stripped = text.strip()
    with contextlib.suppress(json.JSONDecodeError):
        candidates.append(json.loads(stripped))
    for block in _FENCE.findall(text):
        candidates.extend(_objects(block))
    candidates.extend(_objects(text))
    unwrapped = [_unwrap(c, fields) for c in candidates if isinstance(c, dict)]
    for value in unwrapped:
        if isinstance(value, dict) and (not fields or fields & value.keys()):
            return value
    return None
