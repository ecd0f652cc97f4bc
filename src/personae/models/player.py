"""Replaying a scenario: the answer logic shared by the scripted server and function model.

:class:`ScenarioPlayer` picks the answer for a chat-completions style request
body (the next step if it matches, else the first matching rule).
:func:`scripted_function_model` runs the same scenario in-process as a
pydantic-ai ``FunctionModel`` (no HTTP), for unit tests. Both are *scripted*:
they replay answers, they are not language models.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from personae.models import _served
from personae.models.scenario import ROLE_MARKER, Answer, Match, Scenario

__all__ = ["ScenarioPlayer", "request_text", "scripted_function_model"]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def request_text(body: dict[str, Any], *, roles: tuple[str, ...] | None = None) -> str:
    """All message text of a chat-completions request (optionally only some roles)."""
    parts: list[str] = []
    for message in body.get("messages", []):
        if roles is not None and message.get("role") not in roles:
            continue
        parts.append(_content_text(message.get("content")))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            parts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(parts)


def matches(match: Match | None, body: dict[str, Any]) -> bool:
    """Whether a request body meets a step's ``when``."""
    if match is None:
        return True
    if match.role is not None:
        system = request_text(body, roles=("system", "developer"))
        if ROLE_MARKER.format(role=match.role) not in system:
            return False
    if match.contains is not None and match.contains not in request_text(body):
        return False
    if match.last_contains is not None:
        messages = body.get("messages", [])
        last = request_text({"messages": messages[-1:]}) if messages else ""
        if match.last_contains not in last:
            return False
    if match.tool is not None:
        names = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        if match.tool not in names:
            return False
    return True


class ScenarioPlayer:
    """Thread-safe answer picking; keeps every request and answer served."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.requests: list[dict[str, Any]] = []
        """Every request body seen."""
        self.served: list[Answer | None] = []
        """The answer given to each request (``None``: none matched)."""
        self.next_step = 0
        self._lock = threading.Lock()

    @property
    def remaining_steps(self) -> int:
        """Ordered steps not answered yet."""
        return len(self.scenario.steps) - self.next_step

    def pick(self, body: dict[str, Any]) -> Answer | None:
        """The next step if it matches, else the first matching rule, else ``None``."""
        with self._lock:
            self.requests.append(body)
            steps = self.scenario.steps
            answer: Answer | None = None
            if self.next_step < len(steps) and matches(steps[self.next_step].when, body):
                answer = steps[self.next_step]
                self.next_step += 1
            else:
                answer = next((r for r in self.scenario.rules if matches(r.when, body)), None)
            self.served.append(answer)
            return answer

    def no_answer_message(self) -> str:
        """Why a request got no answer."""
        where = f"step {self.next_step + 1}" if self.remaining_steps else "end of steps"
        return f"scripted scenario has no answer for this request ({where})"


def _body_from_messages(messages: list[Any], info: Any) -> dict[str, Any]:
    # local import: pydantic-ai loads only for the FunctionModel, not in the server process
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[dict[str, Any]] = []
    if info.instructions:
        out.append({"role": "system", "content": info.instructions})
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    out.append({"role": "system", "content": part.content})
                elif isinstance(part, UserPromptPart):
                    out.append({"role": "user", "content": str(part.content)})
                elif isinstance(part, ToolReturnPart):
                    out.append({"role": "tool", "content": part.model_response_str()})
                elif isinstance(part, RetryPromptPart):
                    out.append({"role": "user", "content": part.model_response()})
        elif isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = [
                {"function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            out.append({"role": "assistant", "content": text, "tool_calls": calls})
    tools = [
        {"type": "function", "function": {"name": t.name}}
        for t in [*info.function_tools, *info.output_tools]
    ]
    return {"messages": out, "tools": tools}


def scripted_function_model(scenario: Scenario, *, label: str = "scripted") -> Any:
    """An in-process pydantic-ai ``FunctionModel`` replaying ``scenario``.

    The returned model has a ``player`` attribute (:class:`ScenarioPlayer`)
    with every request seen.
    """
    # local import: pydantic-ai loads only for the FunctionModel, not in the server process
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import RequestUsage

    player = ScenarioPlayer(scenario)

    def respond(messages: list[Any], info: Any) -> ModelResponse:
        body = _body_from_messages(messages, info)
        answer = player.pick(body)
        if answer is None:
            raise ModelHTTPError(500, label, player.no_answer_message())
        if answer.error is not None:
            status = int(answer.error.get("status", 500))
            raise ModelHTTPError(status, label, str(answer.error.get("message", "scripted")))
        parts: list[Any] = []
        if answer.output is not None:
            if info.output_tools:
                parts.append(ToolCallPart(info.output_tools[0].name, dict(answer.output)))
            else:
                parts.append(TextPart(json.dumps(answer.output)))
        elif answer.tool_calls:
            if answer.text:
                parts.append(TextPart(answer.text))
            parts.extend(ToolCallPart(c.name, dict(c.args)) for c in answer.tool_calls)
        else:
            parts.append(TextPart(answer.text or ""))
        tools = [  # as sent to a server: name, description and parameters
            {"name": t.name, "description": t.description or "",
             "parameters": t.parameters_json_schema}
            for t in [*info.function_tools, *info.output_tools]
        ]  # fmt: skip
        said = {
            "content": "".join(p.content for p in parts if isinstance(p, TextPart)),
            "tool_calls": [
                {"function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
                for p in parts
                if isinstance(p, ToolCallPart)
            ],
        }
        usage = RequestUsage(
            input_tokens=_served.prompt_tokens({"messages": body["messages"], "tools": tools}),
            output_tokens=_served.completion_tokens(said),
        )
        return ModelResponse(parts=parts, usage=usage, model_name=label)

    model = FunctionModel(respond, model_name=label)
    model.player = player  # type: ignore[attr-defined]
    return model
