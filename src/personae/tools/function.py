"""Python functions as tools: the signature is the JSON schema, the docstring the description.

:func:`function_tool` turns a typed callable (sync or ``async``) into a
:class:`~personae.tools.base.Tool`, as pydantic-ai's ``Agent(tools=[...])``,
the OpenAI Agents SDK's ``@function_tool`` and LangChain's ``@tool`` do: each
parameter's annotation and default become a field of the argument model
(validated before the function runs), the docstring's text the tool's
description, and its ``Args:`` (Google, NumPy or Sphinx style) the fields'
descriptions. The function's return value is what the model sees: a string
as it is, anything else as JSON.

A function tool joins the run's tool registry beside the built-in tools, so a
persona's ``tools`` list narrows it like any other tool.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError

from personae.errors import UsageError
from personae.tools.base import Tool, ToolContext
from personae.tools.names import BUILTIN_TOOL_NAMES, MCP_TOOL_NAME, canonical_tool_name

__all__ = ["ToolLike", "function_tool", "function_tools"]

ToolLike = Callable[..., Any] | Tool[Any]
"""What a run accepts as a tool: a typed Python callable or a ready :class:`Tool`."""

_NO_DOC = "(no description)"


def _doc_parts(func: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The docstring's text (without its sections) and each documented parameter's text."""
    doc = inspect.getdoc(func) or ""
    if not doc:
        return "", {}
    # local import: griffe (a pydantic-ai dependency) parses docstrings only for function tools
    import griffe

    logging.getLogger("griffe").setLevel(logging.ERROR)  # "no type for parameter" notes
    text: list[str] = []
    params: dict[str, str] = {}
    for section in griffe.Docstring(doc, parser="auto").parse():
        if section.kind is griffe.DocstringSectionKind.text:
            text.append(str(section.value).strip())
        elif section.kind is griffe.DocstringSectionKind.parameters:
            params.update({p.name: p.description.strip() for p in section.value})
    return "\n\n".join(t for t in text if t), params


def _field(param: inspect.Parameter, hint: Any, described: str | None) -> tuple[Any, FieldInfo]:
    default = ... if param.default is inspect.Parameter.empty else param.default
    return hint, Field(default, description=described) if described else Field(default)


def function_tool(
    func: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> Tool[Any]:
    """A :class:`Tool` calling ``func`` with the model's (validated) arguments.

    ``name`` defaults to the function's name, ``description`` to its docstring's
    text. Every parameter needs a type annotation (``*args``/``**kwargs`` are
    refused). Errors are :class:`~personae.errors.UsageError`, naming the function.

    Example::

        def forecast(city: str, days: int = 3) -> str:
            '''The weather forecast for a city.

            Args:
                city: The city's name.
                days: How many days ahead.
            '''
            return f"{city}: sunny for {days} days"

        tool = function_tool(forecast)
        tool.parameters["required"]  # ['city']
    """
    label = getattr(func, "__qualname__", repr(func))
    if not callable(func):
        raise UsageError(f"a tool must be a callable or a Tool, got {type(func).__name__}")
    try:
        signature = inspect.signature(func)
        hints = get_type_hints(func)
    except (TypeError, ValueError, NameError) as exc:
        raise UsageError(f"function tool {label}: cannot read its signature: {exc}") from exc
    text, documented = _doc_parts(func)
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise UsageError(
                f"function tool {label}: *{param.name} cannot be offered to a model; "
                "name each parameter"
            )
        if param.name not in hints:
            raise UsageError(
                f"function tool {label}: parameter {param.name!r} needs a type annotation"
            )
        fields[param.name] = _field(param, hints[param.name], documented.get(param.name))
    tool_name: str = name or str(getattr(func, "__name__", ""))
    params: type[BaseModel] = create_model(  # type: ignore[call-overload]
        f"{tool_name or 'tool'}_args",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **fields,
    )
    is_async = inspect.iscoroutinefunction(func)
    names = list(fields)

    async def call_async(args: BaseModel, _ctx: ToolContext) -> str:
        return _as_text(await func(**{n: getattr(args, n) for n in names}))

    def call_sync(args: BaseModel, _ctx: ToolContext) -> str:
        return _as_text(func(**{n: getattr(args, n) for n in names}))

    return Tool(
        name=tool_name,
        description=description or text or _NO_DOC,
        params=params,
        func=call_async if is_async else call_sync,
    )


def _as_text(value: Any) -> str:
    """What the model sees of a function's return value: text as it is, else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return TypeAdapter(Any).dump_json(value).decode()
    except PydanticSerializationError:
        return repr(value)


def function_tools(tools: Iterable[ToolLike]) -> list[Tool[Any]]:
    """Each of ``tools`` (callables or :class:`Tool` objects) as a :class:`Tool`; two
    with one name are a :class:`UsageError`."""
    if callable(tools) or isinstance(tools, Tool | str | bytes):
        raise UsageError("tools must be a list of callables or Tool objects", field="tools")
    made: dict[str, Tool[Any]] = {}
    for item in tools:
        tool = item if isinstance(item, Tool) else function_tool(item)
        if canonical_tool_name(tool.name) in BUILTIN_TOOL_NAMES or MCP_TOOL_NAME.match(tool.name):
            raise UsageError(
                f"tool {tool.name!r} has the name of a built-in or MCP tool; rename it",
                field="tools",
            )
        if tool.name in made:
            raise UsageError(f"two tools are named {tool.name!r}", field="tools")
        made[tool.name] = tool
    return list(made.values())
