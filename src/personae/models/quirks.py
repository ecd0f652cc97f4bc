"""Local OpenAI-compatible servers' habits, handled where requests are made.

- llama-cpp-python refuses (HTTP 500) an assistant message whose ``content`` is
  ``null``, which OpenAI's API allows and pydantic-ai sends for a turn that only calls
  tools: such a turn is sent with empty text instead.
- Local servers read ``max_tokens``; OpenAI's newer ``max_completion_tokens`` is not
  read by llama-cpp-python, so a request's output cap is sent as ``max_tokens``.

Imported only when a local server is used (it loads the OpenAI SDK).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.profiles.openai import OpenAIModelProfile
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from personae.models._http import shared_tls_client, tls_transport

if TYPE_CHECKING:
    from personae.models.early import EarlyRequest

__all__ = ["LocalChatModel", "local_chat_model", "without_null_content"]


def without_null_content(messages: list[Any]) -> list[Any]:
    """``messages`` with every assistant ``content: null`` sent as empty text."""
    for message in messages:
        is_assistant = isinstance(message, dict) and message.get("role") == "assistant"
        if is_assistant and message.get("content") is None:
            message["content"] = ""
    return messages


class LocalChatModel(OpenAIChatModel):
    """An OpenAI chat model for a server on the user's side (llama.cpp, vLLM, Ollama)."""

    async def _map_messages(
        self,
        messages: Sequence[ModelMessage],
        model_request_parameters: ModelRequestParameters,
        *,
        model_settings: ModelSettings | None = None,
    ) -> Any:
        mapped = await super()._map_messages(
            messages, model_request_parameters, model_settings=model_settings
        )
        return without_null_content(list(mapped))


def local_chat_model(
    name: str, base_url: str, key: str | None, *, early: EarlyRequest | None = None
) -> LocalChatModel:
    """A :class:`LocalChatModel` for model ``name`` on the server at ``base_url``;
    ``early``: the run's first request, already sent (:mod:`personae.models.early`): its
    answer answers the identical request."""
    client = shared_tls_client()
    if early is not None:
        # local import: only a run that sent its first request early wraps the transport
        from pydantic_ai.models import create_async_httpx2_client

        from personae.models._early_transport import EarlyTransport

        # no proxy applies (EarlyRequest.send checked): the transport the client would build
        client = create_async_httpx2_client(transport=EarlyTransport(early, tls_transport()))
    provider = OpenAIProvider(base_url=base_url, api_key=key or "not-needed", http_client=client)
    profile = OpenAIModelProfile(openai_chat_supports_max_completion_tokens=False)
    return LocalChatModel(name, provider=provider, profile=profile)
