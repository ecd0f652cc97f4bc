"""One role's context from Python (``personae context build``) and fitting a message list.

:func:`assemble` is the code path of ``personae context build``/``report``
(the CLI calls it). :func:`fit_messages` fits a plain chat message list with
the same core the framework integrations use
(:func:`personae.context.fit_items.fit_items`): whole tool exchanges, the
latest user turn always kept, oldest exchanges evicted first, exact counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from personae.context._textcut import count_small
from personae.context.assemble import AssembledContext, assemble_snapshot
from personae.context.budget import Budget
from personae.context.fit_items import fit_items
from personae.context.messages import ChatMessage, from_stored
from personae.context.profiles import load_profiles
from personae.context.snapshot import Snapshot
from personae.errors import ModelNotConfiguredError, UsageError
from personae.models.resolve import ModelResolver
from personae.persona.cast import Cast
from personae.project import Project
from personae.settings import PersonaeSettings, chosen_model
from personae.store.conversations import ConversationStore
from personae.store.db import Store, store_present
from personae.tokens import exact_counter
from personae.tokens.registry import counter_for_model, model_info

__all__ = ["MESSAGE_OVERHEAD", "Context", "FittedMessages", "assemble", "fit_messages"]

Context = AssembledContext
"""One role's fitted view of one snapshot: ``render()`` is the prompt text,
``report()`` the budget report (``total`` is the exact count of the text)."""

MESSAGE_OVERHEAD = 3
"""Tokens :func:`fit_messages` counts per message besides its content (role and framing)."""

M = TypeVar("M", ChatMessage, Mapping[str, Any])


def assemble(
    root: str | Path,
    role: str,
    *,
    persona: str | None = None,
    task: str | None = None,
    session: str | None = None,
    model: str | None = None,
    budget: int | None = None,
    window: int | None = None,
    step: str | None = None,
) -> Context:
    """Assemble what ``role`` (manager, worker, validator, builder ...) sees in the project
    at ``root``, fitted to a token budget.

    ``budget`` (tokens) or ``window`` (the budget is the settings' share of it;
    default: the model's window). ``model`` picks the tokenizer and window
    (default ``PERSONAE_MODEL``, then the project config). ``session`` adds that
    stored conversation. Same inputs give byte-identical output.
    """
    if budget is not None and window is not None:
        raise UsageError("give a budget or a window, not both", field="budget")
    settings = PersonaeSettings()
    project = Project.open(Path(root))
    chosen, _ = chosen_model(model, settings, project.config.model)
    profiles = load_profiles(project.root)
    profiles.get(role)  # unknown role: fail before reading anything else
    execution = validation = persona_model = None
    if persona is not None:
        cast = Cast.load(project.root)
        execution = cast.execution_block(persona)
        validation = cast.validation_context(persona)
        persona_model = cast.get(persona).model
    resolver = ModelResolver(default=chosen, base_url=project.config.base_url,
                             entries=dict(project.config.models))  # fmt: skip
    try:  # the model the persona runs with, as a run sizes its budget
        label: str | None = resolver.label(persona_model)
    except ModelNotConfiguredError:
        label = None  # no model anywhere: the default tokenizer and window
    counter = counter_for_model(label)
    if budget is not None:
        plan = Budget.absolute(budget)
    else:
        known = model_info(label).context_window
        if window is None and label is not None:
            try:  # as a run knows it: config entry, what the server tells, the table
                known = resolver.facts(persona_model).window
            finally:
                resolver.close()
        plan = Budget.of_window(window or known, settings.budget_share)
    conversations = None
    store = None
    if session is not None:
        if not store_present(project.state_db):  # a PostgreSQL store has no file
            raise UsageError(
                "no conversation store yet (nothing has been run in this project)",
                file=project.state_db,
                field="session",
            )

        store = Store(project.state_db)
        conversations = ConversationStore(store, counter)
    try:
        snapshot = Snapshot.build(
            project.root,
            conversations=conversations,
            session=session,
            counter=counter,
            persona=persona,
            execution_block=execution,
            validation_context=validation,
            task=task,
            step=step,
            profiles=profiles,
            commands=project.config.commands,
            roles=(role,),
        )
        return assemble_snapshot(snapshot, role, plan, counter, profiles=profiles)
    finally:
        if store is not None:
            store.close()


@dataclass(frozen=True)
class FittedMessages:
    """What :func:`fit_messages` returns."""

    messages: list[Any]
    """The kept messages, in order, of the type given (shortened ones rebuilt)."""
    tokens: int
    """Their count (content, tool calls, :data:`MESSAGE_OVERHEAD` per message)."""
    budget: int
    """The budget asked for."""
    dropped: int
    """Messages left out (whole exchanges, oldest first)."""
    shrunk: int
    """Messages of the latest turn whose content was shortened (with a visible notice)."""
    fits: bool
    """``tokens <= budget``; false only when even the latest user message alone is over."""


class _Adapter:
    def parts(self, item: Any) -> list[ChatMessage]:
        return [from_stored(item)]

    def rebuild(self, item: Any, keep: list[int], texts: dict[int, str]) -> Any:
        if 0 not in texts:
            return item
        if isinstance(item, ChatMessage):
            return replace(item, content=texts[0], tokens=None)
        return {**item, "content": texts[0]}


def fit_messages(
    messages: Sequence[M],
    budget: int,
    *,
    model: str | None = None,
    keep_system: bool = True,
) -> FittedMessages:
    """Fit a chat message list into ``budget`` tokens, pair-safe.

    ``messages`` are :class:`personae.context.messages.ChatMessage` objects or
    OpenAI-style dicts (``role``, ``content``, ``tool_calls``, ``tool_call_id``).
    Leading system messages are kept (``keep_system``); the latest user message
    and everything after it are always kept (tool outputs shortened with a
    notice if they alone are over); older exchanges are evicted oldest first,
    an assistant tool call always together with all of its results. Counts
    use ``model``'s tokenizer (default: exact ``o200k_base``).
    """
    if budget < 1:
        raise UsageError(f"budget must be at least 1 token, not {budget}", field="budget")
    counter = counter_for_model(model) if model else exact_counter()

    def count(items: list[Any]) -> int:
        # The fit measures many candidate lists that share most of their texts: each
        # distinct text is tokenized once (the process's count memo).
        total = 0
        for item in items:
            m = from_stored(item)
            total += MESSAGE_OVERHEAD + count_small(counter, m.content)
            total += sum(
                count_small(counter, c.name) + count_small(counter, c.arguments)
                for c in m.tool_calls
            )
        return total

    fitted = fit_items(
        list(messages), _Adapter(), count, budget, keep_system=keep_system, text_counter=counter
    )
    return FittedMessages(
        messages=fitted.items, tokens=fitted.tokens, budget=budget, dropped=fitted.dropped,
        shrunk=fitted.shrunk, fits=fitted.fits,
    )  # fmt: skip
