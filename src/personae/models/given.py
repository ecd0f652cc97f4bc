"""A model the caller built: a pydantic-ai model object, or a provider SDK client.

pydantic-ai's users pass ``Agent(model=OpenAIChatModel(...))``; the OpenAI Agents
SDK's users pass an ``AsyncOpenAI`` client (``OpenAIChatCompletionsModel(model=...,
openai_client=...)``) or a base URL. :func:`given_resolver` turns any of these into a
:class:`~personae.models.resolve.ModelResolver` that answers every persona with that
model, so a run uses it instead of resolving ``provider:name`` specs.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_ai.models import Model

from personae.errors import UsageError
from personae.models.resolve import ModelResolver, parse_model_spec

__all__ = ["given_resolver", "model_label"]


def model_label(model: Model) -> str:
    """``provider:name`` of a pydantic-ai model object (``openai:gpt-4o``)."""
    name = model.model_name
    return name if name.startswith(f"{model.system}:") else f"{model.system}:{name}"


def _from_client(name: str, client: Any) -> tuple[Model, str]:
    module = type(client).__module__.partition(".")[0]
    if module == "openai":
        # local import: a provider's SDK loads only when that provider is used
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        chat = OpenAIChatModel(name, provider=OpenAIProvider(openai_client=client))
        return chat, f"openai:{name}"
    if module == "anthropic":
        # local import: a provider's SDK loads only when that provider is used
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        messages = AnthropicModel(name, provider=AnthropicProvider(anthropic_client=client))
        return messages, f"anthropic:{name}"
    raise UsageError(
        f"client must be an openai.AsyncOpenAI or anthropic.AsyncAnthropic client, got "
        f"{type(client).__module__}.{type(client).__name__}",
        field="client",
    )


def _is_model_object(model: object) -> bool:
    """``model`` is a pydantic-ai ``Model`` (whoever made one has loaded pydantic-ai: a
    name or nothing does not load it)."""
    if model is None or isinstance(model, str) or "pydantic_ai.models" not in sys.modules:
        return False
    from pydantic_ai.models import Model  # local import: loaded already (checked above)

    return isinstance(model, Model)


def given_resolver(
    model: object, *, client: object = None, base_url: str | None = None,
    api_key: str | None = None,
) -> ModelResolver | None:  # fmt: skip
    """A resolver answering every persona with the model the caller gave, or ``None``
    when ``model`` is a plain ``provider:name`` spec (or ``None``) and nothing else was given.

    - ``model`` a pydantic-ai ``Model`` object: that model (``client`` and ``base_url``
      are then refused);
    - ``model`` a name or ``provider:name`` with ``client`` (an ``openai.AsyncOpenAI`` or
      ``anthropic.AsyncAnthropic``): that model over that client;
    - with ``base_url``: an OpenAI-compatible server there (``api_key`` if it needs one),
      its habits handled as for a ``base_url`` in the project config.

    Raises :class:`UsageError` naming the field for anything else.
    """
    if _is_model_object(model):
        if client is not None or base_url is not None:
            raise UsageError("give client or base_url with a model name, not with a model "
                             "object (it has its own)", field="model")  # fmt: skip
        return ModelResolver.using(model, model_label(model))  # type: ignore[arg-type]
    if client is None and base_url is None:
        if model is not None and not isinstance(model, str):
            raise UsageError(
                f"model must be a 'provider:name' spec or a pydantic-ai Model, got "
                f"{type(model).__name__}",
                field="model",
            )
        return None
    if client is not None and base_url is not None:
        raise UsageError("give client or base_url, not both", field="base_url")
    if not isinstance(model, str) or not model.strip():
        raise UsageError("a client or base_url needs the model's name (model='gpt-4o')",
                         field="model")  # fmt: skip
    default = "anthropic" if type(client).__module__.startswith("anthropic") else "openai"
    spec = parse_model_spec(model if ":" in model else f"{default}:{model}", source="model")
    if client is not None:
        built, label = _from_client(spec.name, client)
        return ModelResolver.using(built, label)
    # local import: the local-server model (openai SDK) loads only for a base URL
    from personae.models.quirks import local_chat_model

    return ModelResolver.using(local_chat_model(spec.name, str(base_url), api_key),
                               f"{spec.provider}:{spec.name}")  # fmt: skip
