"""The per-turn snapshot (seed 000's AgentContext): built once, shared by every role.

Everything a role might see is read once here: the directive (fresh from disk
every turn), the conversation (path A: stored running summary + recent
messages; path B: recent messages only), the active persona's execution block
and validation context (passed in as text, so this module does not depend on
how personas are loaded), the handover section, the task and the project
files. The snapshot's id is a hash of its content.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from personae.context._conversation import Summarizer, load_conversation
from personae.context._window import messages_digest
from personae.context.commands import CommandRun, expand_commands, has_commands
from personae.context.messages import ChatMessage, from_stored
from personae.context.profiles import ProfileSet, load_profiles
from personae.context.report import HistoryPath
from personae.context.sources import (
    git_log,
    read_directive,
    read_named,
    read_project,
    resolve_task,
)
from personae.project import CommandsConfig, load_config
from personae.tokens.base import TokenCounter

if TYPE_CHECKING:
    from personae.store.conversations import ConversationStore

__all__ = ["Snapshot", "Summarizer", "history_window"]


def history_window(profiles: ProfileSet) -> int:
    """Messages read from the store for the recent window: the largest ``max_messages``
    of the profiles (64 for a messages section without one; 6 when none has one)."""
    limits = [
        s.max_messages or 64
        for p in profiles.profiles.values()
        for s in p.sections
        if s.source == "messages"
    ]
    return max(limits, default=6)


@dataclass(frozen=True, eq=False)
class Snapshot:
    """Everything one turn's contexts are assembled from (immutable)."""

    id: str
    """Content hash (16 hex digits): same inputs, same id."""
    root: Path
    """Project root."""
    texts: dict[str, str]
    """Source key -> content (directive, summary, persona, handover, task, project files...)."""
    files: dict[str, str]
    """Source key -> where the content came from."""
    messages: tuple[ChatMessage, ...] = ()
    """Recent conversation messages, oldest first."""
    earlier: int = 0
    """Older messages neither in ``messages`` nor covered by the summary."""
    history_path: HistoryPath = "none"
    """A (summary + recent), B (trim only) or none."""
    persona: str | None = None
    """Active persona name."""
    task_type: str = "general"
    """Detected task type (ui, api, testing, general)."""
    step_without_decisions: str | None = None
    """STEP.md without its Decisions section (used when the role also sees decisions)."""
    profile_texts: dict[str, str] = field(default_factory=dict)
    """Profile ``text`` -> text with ``!command`` output injected."""
    commands: tuple[CommandRun, ...] = ()
    """Every ``!command`` seen while building, and whether it ran."""
    profiles: ProfileSet | None = None
    """The profiles the snapshot was built for."""
    warnings: tuple[str, ...] = ()
    """Things that went wrong but did not stop the turn (e.g. a failing summarizer)."""
    cache: dict[Any, Any] = field(default_factory=dict, repr=False)
    """Per-counter counts, filled by assembly (not part of the id)."""
    window: Hashable | None = field(default=None, repr=False)
    """Key of the in-process window of this conversation (what earlier turns of the
    session prepared is reused); ``None``: no conversation."""

    @classmethod
    def build(
        cls,
        root: Path | str,
        *,
        conversations: ConversationStore | None = None,
        session: str | None = None,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
        recent: int | None = None,
        messages: Sequence[object] | None = None,
        persona: str | None = None,
        execution_block: str | None = None,
        validation_context: str | None = None,
        persona_from_handover: bool = False,
        handover: str | None = None,
        task: str | None = None,
        step: str | None = None,
        profiles: ProfileSet | None = None,
        commands: CommandsConfig | None = None,
        include_git_log: bool = True,
        warnings: Sequence[str] = (),
        max_tokens: int | None = None,
    ) -> Snapshot:
        """Build the snapshot of one turn.

        ``conversations`` is a :class:`~personae.store.conversations.ConversationStore`
        (with ``session`` and ``counter``); ``messages`` may be given directly
        instead (path B). ``summarizer(previous_summary, new_messages) -> str``
        selects path A: messages that leave the recent window are folded into
        the stored running summary. ``recent`` (default: the largest
        ``max_messages`` of the profiles, 6 built in) sizes the window read
        from the store. ``persona_from_handover`` marks persona text
        received in a handover: its ``!command`` forms never run.
        ``max_tokens`` (the largest budget the snapshot will be assembled for)
        lets path B stop reading the store once older messages could not fit.
        """
        base = Path(root).resolve()
        profiles = profiles if profiles is not None else load_profiles(base)
        commands = commands if commands is not None else load_config(base / ".personae").commands
        texts: dict[str, str] = {}
        files: dict[str, str] = {}
        runs: list[CommandRun] = []
        directive = read_directive(base)
        if directive is not None:
            texts["directive"], files["directive"] = directive[0], str(directive[1])
        task_text, task_file = resolve_task(base, task)
        project = read_project(base, task=task_text, step=step)
        texts.update(project.texts)
        files.update(project.files)
        for _, spec in sorted(
            {
                s.content_key: s for p in profiles.profiles.values() for s in p.sections if s.files
            }.items()
        ):
            named = read_named(base, spec.source, spec.files or ())
            texts.update(named.texts)
            files.update(named.files)
        if include_git_log:
            log = git_log(base)
            if log is not None:
                texts["git_log"], files["git_log"] = log, f"git log in {base}"
        for key, value, where in (
            ("persona", execution_block, f"persona {persona}"),
            ("validation", validation_context, f"persona {persona}"),
            ("handover", handover, "handover"),
            ("task", task_text, task_file or "--task"),
        ):
            if value and value.strip():
                text = value
                if key == "persona" and has_commands(text):
                    text, done = expand_commands(
                        text, commands, base, trusted=not persona_from_handover
                    )
                    runs.extend(done)
                texts[key], files[key] = text, where
        profile_texts: dict[str, str] = {}
        for text in sorted(
            {s.text for p in profiles.profiles.values() for s in p.sections if s.text}
        ):
            if has_commands(text):
                profile_texts[text], done = expand_commands(text, commands, base)
                runs.extend(done)
        if recent is None:
            recent = history_window(profiles)
        history: tuple[ChatMessage, ...] = ()
        notes: list[str] = list(warnings)
        earlier, path = 0, "none"
        if conversations is not None and session is not None:
            if counter is None:
                counter = conversations.counter
            loaded = load_conversation(
                conversations,
                session,
                counter,
                recent=recent,
                summarizer=summarizer,
                token_limit=max_tokens,
            )
            history, earlier, path = loaded.messages, loaded.earlier, loaded.path
            if loaded.warning:
                notes.append(loaded.warning)
            if loaded.summary:
                texts["summary"], files["summary"] = loaded.summary, f"session {session}"
            files["messages"] = f"session {session}"
        elif messages:
            kinds = set(map(type, messages))  # C-speed: a long list of ChatMessage is common
            history = (
                tuple(messages)  # type: ignore[arg-type]
                if kinds == {ChatMessage}
                else tuple(from_stored(m) for m in messages)
            )
            path = "B"
            files["messages"] = "given messages"
        digest = hashlib.sha256()
        head = {
            "root": str(base),
            "texts": texts,
            "step_without_decisions": project.step_without_decisions,
            "profile_texts": profile_texts,
            "earlier": earlier,
            "path": path,
            "persona": persona,
        }
        digest.update(json.dumps(head, sort_keys=True, ensure_ascii=False).encode())
        window: Hashable | None = None
        if history:
            where = f"session {session}" if session is not None else "given messages"
            window = (str(base), where)
            digest.update(messages_digest(window, history))
        return cls(
            id=digest.hexdigest()[:16],
            root=base,
            texts=texts,
            files=files,
            messages=history,
            earlier=earlier,
            history_path=path,  # type: ignore[arg-type]
            persona=persona,
            task_type=project.task_type,
            step_without_decisions=project.step_without_decisions,
            profile_texts=profile_texts,
            commands=tuple(runs),
            profiles=profiles,
            warnings=tuple(notes),
            window=window,
        )

    def content(self, source: str) -> str | None:
        """The text of a source key (``None`` when absent)."""
        return self.texts.get(source)
