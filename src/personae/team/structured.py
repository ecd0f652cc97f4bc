"""One structured model call (a plan, a verdict) in the output mode that fits the model.

``tool`` mode asks pydantic-ai for the output type (an output tool). ``native`` and
``prompted`` ask for text: the JSON schema goes in the instructions, ``native`` also
sends it as the request's ``response_format`` so the server constrains decoding; the
answer is read leniently (:func:`personae.models.output.extract_json`) and checked
against the type. An answer that does not parse is asked again (a fresh call, counted
and stored like any other) up to ``attempts`` times; then
:class:`StructuredOutputError` names the role, the model and the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError, create_model
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage

from personae.errors import RunError, UsageError
from personae.models.output import (
    extract_json,
    response_format,
    schema_instructions,
    wire_schema,
)
from personae.team.runtime import CallInfo, CallOptions, Runtime

__all__ = ["AnswerType", "AnswerTypeError", "StructuredOutputError", "ask_structured",
           "wire_schema"]  # fmt: skip

T = TypeVar("T", bound=BaseModel)


class StructuredOutputError(UnexpectedModelBehavior):
    """The model's answer did not parse as the structured output asked for."""


class AnswerTypeError(RunError):
    """The run's final answer did not parse as the ``output_type`` asked for (after a
    retry); the message names the type and the first problem, ``data`` the run id."""


@dataclass(frozen=True)
class AnswerType:
    """The type a caller wants a run's final answer as (a pydantic model, or any type
    pydantic validates: ``int``, ``list[str]``, a dataclass ... wrapped in a model)."""

    wanted: Any
    """The type as the caller gave it."""
    model: type[BaseModel]
    """The pydantic model asked of the model (``wanted`` itself, or one ``answer`` field)."""

    @classmethod
    def of(cls, wanted: Any) -> AnswerType:
        """The answer type for ``wanted``; a type pydantic cannot validate is a
        :class:`UsageError` naming ``output_type``."""
        try:
            if isinstance(wanted, type) and issubclass(wanted, BaseModel):
                wanted.model_json_schema()  # a model that is not fully defined fails here
                return cls(wanted, wanted)
            model: type[BaseModel] = create_model("Answer", answer=(wanted, ...))
            model.model_json_schema()
        except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
            raise UsageError(
                f"output_type {wanted!r} is not a type pydantic can validate: "
                f"{str(exc).splitlines()[0]}",
                field="output_type",
            ) from None
        return cls(wanted, model)

    @property
    def name(self) -> str:
        """The type's name, for messages."""
        return str(getattr(self.wanted, "__name__", None) or self.wanted)

    def unwrap(self, value: BaseModel) -> Any:
        """The caller's value from the model's (the ``answer`` field of a wrapped type)."""
        return value if self.model is self.wanted else value.__dict__["answer"]


def _last_problem(messages: list[ModelMessage]) -> str:
    """The first validation problem of the last output retry in ``messages`` (``""``: none;
    pydantic-ai returns the errors to the model as the output tool's result)."""
    for message in reversed(messages):
        for part in getattr(message, "parts", ()):
            errors = getattr(part, "content", None)  # a retry: the validation errors
            if isinstance(errors, list) and errors and isinstance(errors[0], dict):
                first = errors[0]
                place = ".".join(str(p) for p in first.get("loc", ())) or "(answer)"
                return f"{place}: {first.get('msg', '')}"
    return ""


async def ask_structured(
    runtime: Runtime,
    info: CallInfo,
    *,
    instructions: str,
    prompt: str,
    output_type: type[T],
    persona_model: str | None = None,
    timeout: float | None = None,
    attempts: int = 3,
) -> T:
    """Ask the model for one ``output_type`` object in its output mode."""
    facts = runtime.models.facts(persona_model)
    what = output_type.__name__.lower()
    where = f"the {info.role} got no valid {what} from {facts.label} ({facts.where}"
    if facts.output_mode == "tool":
        sent: list[ModelMessage] = []
        try:
            output, _ = await runtime.call(
                info, instructions=instructions, prompt=prompt,
                options=CallOptions(output_type=output_type, persona_model=persona_model,
                                    timeout=timeout),
                messages_out=sent,
            )  # fmt: skip
        except UnexpectedModelBehavior as exc:
            problem = _last_problem(sent)
            raise StructuredOutputError(
                f"{where}, output mode tool): {exc.message}"
                + (f" (last problem: {problem})" if problem else "")
                + "; try output_mode: prompted or native in the model's models: entry of "
                ".personae/config.yaml"
            ) from exc
        if not isinstance(output, output_type):
            raise TypeError(f"{info.role} call returned {type(output).__name__}, not {what}")
        return output
    schema = wire_schema(output_type)
    extra = None
    if facts.output_mode == "native":
        extra = {"response_format": response_format(facts.server, what, schema)}
    asked = f"{instructions}\n\n{schema_instructions(schema)}"
    fields = frozenset(schema.get("properties", {}))
    problem = ""
    for _ in range(max(1, attempts)):
        text, _ = await runtime.call(
            info, instructions=asked, prompt=prompt,
            options=CallOptions(persona_model=persona_model, timeout=timeout, extra_body=extra),
        )  # fmt: skip
        found = extract_json(str(text), fields)
        if found is None:
            problem = "no JSON object in the answer: " + " ".join(str(text).split())[:120]
            continue
        try:
            return output_type.model_validate(found)
        except ValidationError as exc:
            first = exc.errors()[0]
            place = ".".join(str(p) for p in first["loc"]) or what
            problem = f"{place}: {first['msg']}"
    raise StructuredOutputError(
        f"{where}, output mode {facts.output_mode}) in {max(1, attempts)} tries: {problem}"
    )
