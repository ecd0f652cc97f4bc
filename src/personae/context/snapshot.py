"""The per-turn snapshot: built once, shared by every role.

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
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from personae.context._conversation import Loaded, Summarizer, load_conversation
from personae.context._fresh import keep, reuse
from personae.context._lru import recall, remember
from personae.context._probe import probe, remembered
from personae.context.commands import CommandRun, expand_commands, has_commands
from personae.context.messages import ChatMessage
from personae.context.profiles import ProfileSet, load_profiles
from personae.context.report import HistoryPath
from personae.context.sources import (
    ProjectFiles,
    git_log,
    read_directive,
    read_named,
    read_project,
    resolve_task,
)
from personae.context.spec import SectionSource
from personae.context.window import ContextWindow, as_chat
from personae.layout import Layout
from personae.project import CommandsConfig, load_config
from personae.tokens.base import TokenCounter

if TYPE_CHECKING:
    from personae.store.conversations import ConversationStore

__all__ = ["Snapshot", "SnapshotOptions", "Summarizer", "history_window"]


def history_window(profiles: ProfileSet) -> int:
    """Messages read from the store for the recent window: the largest ``max_messages``
    of the profiles (64 for a messages section without one; 6 when none has one)."""
    return profiles.window


@dataclass(frozen=True, kw_only=True)
class SnapshotOptions:
    """What one turn's snapshot is built from (besides the project root)."""

    conversations: ConversationStore | None = None
    """The conversation store (path A or B; with ``session`` and ``counter``)."""
    session: str | None = None
    """The session whose messages are read from ``conversations``."""
    counter: TokenCounter | None = None
    """Token counter (default: the store's)."""
    summarizer: Summarizer | None = None
    """``summarizer(previous_summary, new_messages) -> str`` selects path A: messages
    that leave the recent window are folded into the stored running summary."""
    recent: int | None = None
    """Messages read from the store for the window (default: the largest
    ``max_messages`` of the profiles, 6 built in)."""
    messages: Sequence[object] | None = None
    """Messages given directly instead of a store (path B)."""
    persona: str | None = None
    """Active persona name."""
    execution_block: str | None = None
    """The active persona's execution block."""
    validation_context: str | None = None
    """The active persona's validation context."""
    persona_from_handover: bool = False
    """Persona text received in a handover: its ``!command`` forms never run."""
    handover: str | None = None
    """The handover section received from another persona."""
    task: str | None = None
    """The task text, or the name of a task file (``tasks/NAME.md``)."""
    step: str | None = None
    """The current step (default: the first not done)."""
    profiles: ProfileSet | None = None
    """The profiles (default: built-in plus the project's override)."""
    commands: CommandsConfig | None = None
    """Which ``!commands`` may run (default: the project config's)."""
    include_git_log: bool = True
    """Read recent commits (only when a role in ``roles`` shows them)."""
    roles: Sequence[str] | None = None
    """The roles this snapshot will be assembled for: recent commits are read only
    when one of their profiles has a ``git_log`` section. ``None``: any role (read
    whenever ``include_git_log``)."""
    warnings: Sequence[str] = ()
    """Problems met before building (carried into every report)."""
    max_tokens: int | None = None
    """The largest budget the snapshot will be assembled for: path B stops reading
    the store once older messages could not fit."""
    window: ContextWindow | None = None
    """The session's window, kept by the agent loop across turns: what earlier
    turns read and prepared is reused, and its messages (see
    :meth:`ContextWindow.extend`) are the conversation when neither
    ``conversations`` nor ``messages`` is given. ``None``: a fresh window (no
    reuse between turns)."""


@dataclass(frozen=True)
class _Files:
    """Everything read from the project's files for one turn (see ``_probe``)."""

    texts: dict[str, str]
    files: dict[str, str]
    project: ProjectFiles
    task: str | None


def _read_files(base: Path, opts: SnapshotOptions, profiles: ProfileSet) -> _Files:
    texts: dict[str, str] = {}
    files: dict[str, str] = {}
    directive = read_directive(base)
    if directive is not None:
        texts["directive"], files["directive"] = directive[0], str(directive[1])
    task_text, task_file = resolve_task(base, opts.task)
    project = read_project(base, task=task_text, step=opts.step)
    texts.update(project.texts)
    files.update(project.files)
    for spec in profiles.named_files:
        named = read_named(base, spec.source, spec.files or ())
        texts.update(named.texts)
        files.update(named.files)
    if task_text and task_text.strip():
        texts["task"], files["task"] = task_text, task_file or "--task"
    return _Files(texts, files, project, task_text)


def _commands_of(base: Path) -> CommandsConfig:
    layout = Layout(base)
    for path in layout.config_files:  # what load_config looks at, recorded
        probe(path, follow=False)
        probe(path)
    return load_config(layout).commands


_HEADS: OrderedDict[Hashable, Any] = OrderedDict()
"""The hash states of the heads (texts, paths...) fresh snapshots of this process
hashed, by their values: a fresh snapshot of an unchanged project does not serialise
and hash them again."""
_HEADS_MAX = 32


def _digest(base: Path, built: _Built) -> str:
    # The same head as the previous turn's (compared value by value: the same string
    # objects when the files were not read again) is not serialised and hashed again.
    root, step = str(base), built.files.project.step_without_decisions
    earlier, path, persona = built.history.earlier, built.history.path, built.opts.persona
    key = (
        root, tuple(built.texts.items()), step, tuple(built.profile_texts.items()),
        earlier, path, persona,
    )  # fmt: skip
    window = built.window
    last = window.head
    if last is None and window.shares:  # a fresh window: the process's earlier heads
        held = recall(_HEADS, key)
        last = None if held is None else (key, held)
    digest: Any
    if last is not None and last[0] == key:
        digest = last[1].copy()
    else:
        head = {
            "root": root, "texts": built.texts, "step_without_decisions": step,
            "profile_texts": built.profile_texts, "earlier": earlier, "path": path,
            "persona": persona,
        }  # fmt: skip
        digest = hashlib.sha256()
        digest.update(json.dumps(head, sort_keys=True, ensure_ascii=False).encode())
        window.head = (key, digest.copy())
        if window.shares:
            remember(_HEADS, key, digest.copy(), _HEADS_MAX)
    built.head_state = digest.copy()
    if built.history.messages:
        digest.update(built.window.digest())
    hexdigest: str = digest.hexdigest()
    return hexdigest[:16]


def _options(options: SnapshotOptions | None, fields: dict[str, Any]) -> SnapshotOptions:
    """The options of one build; a window's previous options when its keyword arguments
    are equal to the previous build's (an agent loop repeats them turn after turn)."""
    if options is None:
        window = fields.get("window")
        if isinstance(window, ContextWindow):
            last = window.options
            if last is not None and last[0] == fields:
                return last[1]  # type: ignore[no-any-return]
            opts = SnapshotOptions(**fields)
            window.options = (dict(fields), opts)
            return opts
        if window is None:  # no window: a fresh one, made with the options (no copy)
            return SnapshotOptions(**{**fields, "window": ContextWindow(shared=True)})
        opts = SnapshotOptions(**fields)
    else:
        opts = replace(options, **fields) if fields else options
    if opts.window is None:
        opts = replace(opts, window=ContextWindow(shared=True))
    return opts


class _Previous(NamedTuple):
    """A window's previous snapshot and what it was built from (``ContextWindow.built``)."""

    options: SnapshotOptions
    files: _Files
    """The project files read (the same object while no file changed)."""
    history: Loaded
    snapshot: Snapshot
    notes: list[str]
    """The warnings given to the build."""


_NO_HISTORY = Loaded(None, None, (), 0, "none", 0)


def _same_history(a: Loaded, b: Loaded) -> bool:
    """The same conversation read (the same message objects, summary and counts)."""
    return a is b or (
        a.messages is b.messages
        and (a.summary, a.summary_tokens, a.earlier, a.path, a.folded, a.warning)
        == (b.summary, b.summary_tokens, b.earlier, b.path, b.folded, b.warning)
    )


class _Built:
    """The steps of :meth:`Snapshot.build`, each short."""

    def __init__(self, base: Path, opts: SnapshotOptions) -> None:
        self.base = base
        self.opts = opts
        self.profiles = opts.profiles if opts.profiles is not None else load_profiles(base)
        self.runs: list[CommandRun] = []
        self.notes: list[str] = list(opts.warnings)
        self._commands = opts.commands
        self.window: ContextWindow = opts.window  # type: ignore[assignment]  # set by build
        self.files_key = (str(base), opts.task, opts.step, self.profiles.named_keys)
        self.files = remembered(
            self.window.files, self.files_key, lambda: _read_files(base, opts, self.profiles)
        )
        self.chat: tuple[ChatMessage, ...] | None = None
        """``opts.messages`` as chat messages, when already converted."""
        self.head_state: Any = None
        """The snapshot id's hash state before its messages (see ``_digest``)."""
        self.texts = dict(self.files.texts)
        self.where = dict(self.files.files)
        self.profile_texts: dict[str, str] = {}
        self.history = _NO_HISTORY

    @property
    def commands(self) -> CommandsConfig:
        if self._commands is None:
            base = self.base
            self._commands = remembered(
                self.window.files, ("config", str(base)), lambda: _commands_of(base)
            )
        return self._commands

    def shows_git_log(self) -> bool:
        """True when the git log is to be read: asked for, and shown by a role of the turn."""
        opts = self.opts
        if not opts.include_git_log:
            return False
        if opts.roles is None:
            return True
        return any(
            s.source == SectionSource.GIT_LOG
            for role in opts.roles
            for s in self.profiles.get(role).sections
        )

    def add_git_log(self) -> None:
        log = git_log(self.base) if self.shows_git_log() else None
        if log is not None:
            self.texts["git_log"], self.where["git_log"] = log, f"git log in {self.base}"

    def add_persona(self) -> None:
        opts, persona = self.opts, self.opts.persona
        for key, value in (
            ("persona", opts.execution_block),
            ("validation", opts.validation_context),
        ):
            if value and value.strip():
                text = value
                if key == "persona" and has_commands(text):
                    text, done = expand_commands(
                        text, self.commands, self.base, trusted=not opts.persona_from_handover
                    )
                    self.runs.extend(done)
                self.texts[key], self.where[key] = text, f"persona {persona}"
        if opts.handover and opts.handover.strip():
            self.texts["handover"], self.where["handover"] = opts.handover, "handover"

    def expand_profile_texts(self) -> None:
        for text in self.profiles.command_texts:
            self.profile_texts[text], done = expand_commands(text, self.commands, self.base)
            self.runs.extend(done)

    def read_history(self) -> None:
        """Read the conversation (the window then holds its messages)."""
        opts, window = self.opts, self.window
        if opts.conversations is not None and opts.session is not None:
            self.history = load_conversation(
                opts.conversations,
                opts.session,
                opts.counter if opts.counter is not None else opts.conversations.counter,
                recent=opts.recent if opts.recent is not None else self.profiles.window,
                summarizer=opts.summarizer,
                token_limit=opts.max_tokens,
                reads=window.store_reads,
                adopt=window.sync,
            )
            synced = window.sync(self.history.messages)
            if synced is not self.history.messages:
                self.history = replace(self.history, messages=synced)
        elif opts.messages is not None:
            if self.chat is None:
                self.chat = as_chat(opts.messages)
            given = window.sync(self.chat)
            if given:
                self.history = Loaded(None, None, given, 0, "B", 0)
        elif len(window):
            self.history = Loaded(None, None, window.messages, 0, "B", 0)

    def static(self) -> bool:
        """True when the snapshot depends on nothing but the options, the project files
        and the conversation (no command runs, no git log, no summarizer)."""
        opts = self.opts
        return (
            opts.profiles is not None
            and not self.shows_git_log()
            and opts.summarizer is None
            and not self.profiles.command_texts
            and not (opts.execution_block and has_commands(opts.execution_block))
        )

    def add_history(self) -> None:
        """The conversation's summary, warning and origin (read by :meth:`read_history`)."""
        opts = self.opts
        if opts.conversations is not None and opts.session is not None:
            if self.history.warning:
                self.notes.append(self.history.warning)
            if self.history.summary:
                self.texts["summary"] = self.history.summary
                self.where["summary"] = f"session {opts.session}"
            self.where["messages"] = f"session {opts.session}"
        elif self.history.messages:
            given = opts.messages is not None
            self.where["messages"] = "given messages" if given else "session window"


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
    window: ContextWindow | None = field(default=None, repr=False, compare=False)
    """The session's window the snapshot was built with (assembly prepares the
    conversation through it); ``None``: prepared from scratch."""

    @classmethod
    def build(
        cls, root: Path | str, options: SnapshotOptions | None = None, **fields: Any
    ) -> Snapshot:
        """Build the snapshot of one turn.

        ``options`` (or the same fields as keyword arguments, which override it)
        say what to read: see :class:`SnapshotOptions`. Files unchanged since
        the previous turn (same path, identity, modification time and size) are
        not read again. Without ``options`` and ``window``, the process's previous
        such snapshot is copied when nothing it was built from changed, or its
        messages only had more appended (see ``_fresh``).
        """
        fresh = options is None and fields.get("window") is None
        chat = None
        if fresh:
            again, chat = reuse(cls, root, fields)
            if again is not None:
                return again
        opts = _options(options, fields)
        window = opts.window
        assert window is not None
        built = _Built(window.resolve(root), opts)
        built.chat = chat
        built.read_history()
        last: _Previous | None = window.built
        # Nothing changed since the window's previous snapshot (the same options, the
        # project files found unchanged, the same conversation, nothing run): it is this
        # turn's snapshot too. The given warnings are compared by value: a caller may
        # append to the list it passes again.
        static = built.static()
        if (
            static
            and last is not None
            and last.options is opts
            and last.files is built.files
            and _same_history(last.history, built.history)
            and last.notes == built.notes
        ):
            return last.snapshot
        given_notes = list(built.notes)
        built.add_git_log()
        built.add_persona()
        task = built.files.task
        if task and task.strip() and "task" in built.texts:  # after persona and handover
            built.texts["task"] = built.texts.pop("task")
            built.where["task"] = built.where.pop("task")
        built.expand_profile_texts()
        built.add_history()
        snapshot = cls(
            id=_digest(built.base, built),
            root=built.base,
            texts=built.texts,
            files=built.where,
            messages=built.history.messages,
            earlier=built.history.earlier,
            history_path=built.history.path,  # type: ignore[arg-type]
            persona=opts.persona,
            task_type=built.files.project.task_type,
            step_without_decisions=built.files.project.step_without_decisions,
            profile_texts=built.profile_texts,
            commands=tuple(built.runs),
            profiles=built.profiles,
            warnings=tuple(built.notes),
            window=built.window,
        )
        window.built = (
            _Previous(opts, built.files, built.history, snapshot, given_notes) if static else None
        )
        if static and fresh and opts.conversations is None:
            keep(cls, fields, built, snapshot)
        return snapshot

    def content(self, source: str) -> str | None:
        """The text of a source key (``None`` when absent)."""
        return self.texts.get(source)
