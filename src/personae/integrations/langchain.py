"""personae inside LangChain (``pip install 'personae[langchain]'``).

- :func:`trim_messages`: a drop-in for ``langchain_core.messages.trim_messages``
  (same call shape) that never returns a tool result without its call, always
  keeps the latest human turn, and counts exactly: ``token_counter="approximate"``
  is replaced by personae's exact tokenizer (:func:`count_tokens_exactly`).
- :class:`FitContextMiddleware`: LangChain v1 ``create_agent`` middleware that
  fits the model input (system message + messages) to a budget on every call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import BaseMessage

from personae.context.fit_items import Fitted, fit_items
from personae.integrations._lc_fit import (
    Adapter,
    count_tokens_exactly,
    fit_langchain,
    list_counter,
)
from personae.integrations.langchain_trim import trim_messages

__all__ = ["FitContextMiddleware", "count_tokens_exactly", "fit_langchain", "trim_messages"]


class FitContextMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """``create_agent(..., middleware=[FitContextMiddleware(budget)])``: every model call
    gets its messages fitted so that system message + messages count at most ``budget``.

    ``token_counter`` is any LangChain counter (a function or a chat model);
    the default counts exactly with personae's tokenizer for ``model``.
    """

    def __init__(
        self, budget: int, *, token_counter: Any = "approximate", model: str | None = None
    ) -> None:
        super().__init__()
        self.budget = budget
        self.count = list_counter(token_counter, model)
        self.last: Fitted[BaseMessage] | None = None
        """The most recent fit (for logging and tests)."""

    def _fit(self, request: ModelRequest) -> ModelRequest:  # type: ignore[type-arg]
        system = [request.system_message] if request.system_message is not None else []
        fitted = fit_items(
            [*system, *request.messages],
            Adapter(),
            self.count,
            self.budget,
            keep_system=True,
        )
        self.last = fitted
        kept = fitted.items[len(system) :] if system else fitted.items
        return request.override(messages=cast(Any, kept))

    def wrap_model_call(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        handler: Callable[[ModelRequest], Any],  # type: ignore[type-arg]
    ) -> Any:
        """Fit the request's messages, then call the model."""
        return handler(self._fit(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        handler: Callable[[ModelRequest], Awaitable[Any]],  # type: ignore[type-arg]
    ) -> Any:
        """Async form of :meth:`wrap_model_call`."""
        return await handler(self._fit(request))
