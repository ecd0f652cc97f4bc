"""personae's history fitting side by side with LangChain's ``trim_messages``.

Run: .venv/bin/python -m pip install -e '.[dev,bench]'
     .venv/bin/python bench/bench_vs_langchain.py [--quick] [--budgets N] [--turns N]

Same synthetic agent histories (parallel tool calls, logs, CJK, JSON, huge tool
outputs), same random budgets (500 to 20,000 tokens, ``--budget-range``), exact
o200k_base counts on both sides, CPU
time (``time.process_time``) next to wall time, per turn (one assembly):

- ``langchain``: ``trim_messages(strategy="last", start_on="human",
  include_system=True)`` with a per-message counter that returns cached exact
  counts (every message counted once before timing: its best case);
- ``langchain + to openai``: the same, plus ``convert_to_openai_messages`` of
  what was kept (the request body a real loop sends; personae's rows render
  the prompt too);
- ``personae store``: ``Snapshot.build`` from a SQLite session (counts stored
  at append) + ``assemble`` with a profile whose only limit is the budget;
- ``personae memory``: the same from messages appended to the session's
  ``ContextWindow`` (no stored counts: the window counts each message once);
- ``personae memory, list``: the whole list given again each turn
  (``messages=``; the window compares it with what it holds);
- ``personae stateless``: the whole list given to a fresh snapshot each call, no
  window kept (a server assembling per request, the framework drop-ins): only what
  depends on content alone is shared between calls (counts, token offsets, the
  preparation of the same messages, forms fitted before). It runs first of the
  personae rows, so nothing another row cut or counted at these budgets is in the
  process yet; the on-disk count cache starts empty (a private data folder) unless
  ``--user-count-cache``. With ``--alternate`` its calls and LangChain's cached-exact
  calls are timed alternately, budget by budget, in one process: the machine's speed
  drifts (load, frequency, caches) between two rows timed one after the other, and
  their ratio with it; alternating, both sides meet the same drift.

Every personae row keeps one ``ContextWindow`` across its turns (what an agent
loop keeps). The history does not change between the timed turns (as on
LangChain's side), so each turn's snapshot is the window's previous one once
the store has been asked for the session's count and last seq and the project
files stat'ed (both every turn); every turn fits, renders and counts its own
prompt. Warm-up is the same on every side: every message counted once before
timing (LangChain's counter; one personae turn, which prepares and
counts every message).

``unused`` and ``p90``: mean and 90th percentile of the share of the budget
left unused, over the budgets the history does not fit whole (each side by its
own exact count). Validity columns (all must be 0 for personae): overruns (kept tokens over the
budget, each side by its own exact count), orphan tool results, dangling tool
calls, lost latest user turn; for personae, ``replay``: timed prompts that
differ from the checked replay (must be 0; see ``_personae``) and ``miscnt``:
prompts whose reported total is not the exact count of the whole prompt, counted
whole after timing (must be 0). ``cpu ms`` is the median, ``mean`` the mean. Then a
500-turn agent loop at a 16k budget (``--loop-budget``) that appends before each prompt, at three
cadences (``--cadence``: a prompt at each user message and after each tool
result; at each user message and after a turn's last tool result; at each user
message only): mean share of each prompt that is an identical prefix of the
previous one (also over the prompts whose history was trimmed only), budget
left unused when trimmed, and CPU per prompt (median and
mean; see ``prefix_loop``), for LangChain, a kept window per ``--low-water``,
and stateless (a fresh snapshot per prompt) at the default ``cut_step`` and at
each ``--cut-step``; beside each share, the figures that bound it (growth per
prompt ``g``, head share ``p`` kept where the start moves, share ``s`` freed per
move, the bound ``1 - (g / s)(1 - p)`` and that bound at 5% unused; see
``_loop_figures``).
The share/unused frontier, one cadence per run (40 to 70 s CPU each)::

    bench_vs_langchain.py --sizes 100 --budgets 2 --no-drop-in --cadence "one per turn" \
        --low-water 0.95 0.92 0.88 0.8 0.75 0.5 --cut-step 0.05 0.12 0.25 0.5

``--no-drop-in`` skips the drop-in comparison (minutes).

Prints a table and writes bench/results/vs_langchain.json.
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        convert_to_openai_messages,
        trim_messages,
    )
    from langchain_core.messages.utils import count_tokens_approximately

    from personae.integrations.langchain import trim_messages as personae_trim_messages
except ImportError:  # pragma: no cover - a bench-only extra
    sys.exit("bench_vs_langchain needs the bench extra: pip install -e '.[dev,bench]'")

from _prefix import common_prefix_length

from personae.context import (
    AssembledContext,
    Budget,
    ChatMessage,
    ContextWindow,
    Snapshot,
    assemble_snapshot,
    load_profiles,
)
from personae.context.history import render_message
from personae.context.messages import ChatToolCall
from personae.context.spec import SectionSpec
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.tokens.exact import exact_counter

ROOT = Path(__file__).resolve().parents[1]
COUNTER = exact_counter("o200k_base")
PROSE = "The quick brown fox reviewed the quarterly report and found three issues. "
KINDS = [
    PROSE,
    "日本語のテキストと中文内容混合在一起。データベースの接続に失敗しました。",
    "2026-11-22T10:00:01Z ERROR worker[42]: connection reset by peer (retry 3/5)\n",
    '{"id":"a1b2c3d4-e5f6","items":[{"sku":"X-1","qty":3},{"sku":"Y-22","qty":14}]}\n',
    "def handler(event, ctx):\n    return {'status': 200, 'body': event['q']}\n",
]
PROFILE = (
    "roles:\n  agent:\n    sections:\n      - task\n"
    "      - {tag: recent_messages, cap: 10000000, max_messages: 10000000}\n"
)


class Texts:
    """Message texts from a fixed pool (sizes 5 .. 30,000 characters)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pool = {
            size: [
                (KINDS[i % len(KINDS)] * (size // len(KINDS[i % len(KINDS)]) + 2))[
                    i : i + size
                ].strip()
                or "."
                for i in range(8)
            ]
            for size in (20, 60, 200, 400, 1500, 8000, 30000)
        }

    def __call__(self, size: int) -> str:
        return self.rng.choice(self.pool[size])


def history(n: int, rng: random.Random) -> list[ChatMessage]:
    """About n messages: user turns, assistant steps with 1-3 parallel calls, results."""
    texts = Texts(rng)
    out: list[ChatMessage] = []
    call = 0
    while len(out) < n:
        out.append(ChatMessage("user", f"turn {len(out)}: " + texts(200), seq=len(out) + 1))
        for _ in range(rng.randint(0, 2)):
            ids = [f"c{call + k}" for k in range(rng.randint(1, 3))]
            call += len(ids)
            calls = tuple(
                ChatToolCall(i, "read_file", json.dumps({"path": f"src/{i}.py"})) for i in ids
            )
            out.append(ChatMessage("assistant", texts(60), tool_calls=calls, seq=len(out) + 1))
            for i in ids:
                size = rng.choice(
                    [60, 400, 1500, 1500, 8000, 30000 if rng.random() < 0.05 else 400]
                )
                out.append(ChatMessage("tool", texts(size), tool_call_id=i, seq=len(out) + 1))
        out.append(ChatMessage("assistant", texts(rng.choice([60, 400])), seq=len(out) + 1))
    return out


def to_langchain(msgs: list[ChatMessage]) -> list[BaseMessage]:
    out: list[BaseMessage] = [SystemMessage("You are the builder persona.")]
    for m in msgs:
        if m.role == "user":
            out.append(HumanMessage(m.content, id=str(m.seq)))
        elif m.role == "tool":
            out.append(ToolMessage(m.content, tool_call_id=m.tool_call_id or "", id=str(m.seq)))
        else:
            calls = [
                {"id": c.id, "name": c.name, "args": json.loads(c.arguments), "type": "tool_call"}
                for c in m.tool_calls
            ]
            out.append(AIMessage(m.content, tool_calls=calls, id=str(m.seq)))
    return out


def validity(kept: list[tuple[str, str | None, tuple[str, ...]]], latest: str) -> dict[str, int]:
    """(role, tool_call_id, call ids) per kept message -> orphans, dangling, lost latest."""
    orphans = dangling = 0
    open_ids: set[str] = set()
    answered: set[str] = set()
    for role, tool_id, calls in kept:
        if role == "tool":
            if tool_id in open_ids:
                answered.add(tool_id)
            else:
                orphans += 1
        else:
            dangling += len(open_ids - answered)
            open_ids, answered = set(calls), set()
    dangling += len(open_ids - answered)
    ids = {c for _, _, cs in kept for c in cs}
    return {
        "orphans": orphans,
        "dangling": dangling,
        "lost_latest": int(latest not in {t for r, t, _ in kept if r == "user"}),
        "_ids": len(ids),
    }


def cached_counter(msgs: list[BaseMessage]) -> Callable[[BaseMessage], int]:
    counts = {id(m): COUNTER.count(str(m.content)) + 4 for m in msgs}

    def count(m: BaseMessage) -> int:
        got = counts.get(id(m))
        return got if got is not None else COUNTER.count(str(m.content)) + 4

    # LangChain tells a per-message counter by the first parameter's annotation object.
    count.__annotations__["m"] = BaseMessage
    return count


def _settled() -> None:
    """Collect the cyclic garbage the set-up left (building histories, converting them,
    loading profiles: about 7,000 objects at 100 messages) before a timed sequence:
    otherwise its collection (about 1 ms) lands in whichever timed call happens to cross
    the collector's threshold. Garbage the timed calls make themselves is still
    collected in them."""
    gc.collect()


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, (time.process_time() - c0) * 1000, (time.perf_counter() - w0) * 1000


def bench_size(n: int, budgets: list[int], tmp: Path, *, alternate: bool = False) -> dict[str, Any]:
    """Every row at ``n`` messages over ``budgets`` (``alternate``: LangChain's
    cached-exact calls and personae's stateless calls alternate budget by budget, so
    both sides meet the same machine state; see ``_alternating``)."""
    rng = random.Random(n)
    msgs = history(n, rng)
    latest = next(m for m in reversed(msgs) if m.role == "user")
    root = tmp / f"p{n}"
    (root / ".personae").mkdir(parents=True)
    (root / ".personae" / "profiles.yaml").write_text(PROFILE, encoding="utf-8")
    profiles = load_profiles(root)
    rows: dict[str, dict[str, Any]] = {}
    # LangChain, cached exact counts.
    lc = to_langchain(msgs)
    counter = cached_counter(lc)

    def stateless(_w: ContextWindow) -> Snapshot:
        return Snapshot.build(
            root, messages=msgs, task="Fix the bug", include_git_log=False, profiles=profiles
        )

    lc_timed = p_timed = None
    if alternate:
        lc_timed, p_timed = _alternating(
            _lc_turn(lc, counter, convert=False), _personae_turns(budgets, stateless), budgets
        )
    for name, convert in (("langchain (cached exact)", False), ("langchain + to openai", True)):
        rows[name] = _langchain(
            lc, counter, budgets, latest, convert=convert, timed=None if convert else lc_timed
        )
    # personae, stateless first: nothing another personae row cut or counted for these
    # budgets is in the process yet (only what its own warm-up turn counted).
    rows["personae stateless"] = _personae(budgets, latest, ContextWindow, stateless, timed=p_timed)
    # personae, store path (counts stored at append).
    with Store(root / ".personae" / "state.db") as store:
        conv = ConversationStore(store, COUNTER)
        sid = conv.create_session()
        batch = [
            Message(
                m.role, m.content, tool_call_id=m.tool_call_id,
                tool_calls=[{"id": c.id, "name": c.name, "args": json.loads(c.arguments)}
                            for c in m.tool_calls],
            )
            for m in msgs
        ]  # fmt: skip
        for start in range(0, len(batch), 5000):
            conv.append_many(sid, batch[start : start + 5000])
        rows["personae store"] = _personae(
            budgets, latest, ContextWindow, lambda w: Snapshot.build(
                root, conversations=conv, session=sid, counter=COUNTER, task="Fix the bug",
                include_git_log=False, profiles=profiles, max_tokens=60_000, window=w,
            ),
        )  # fmt: skip

    def appended() -> ContextWindow:
        window = ContextWindow()
        window.extend(msgs)  # what the agent loop appended, turn after turn
        return window

    rows["personae memory"] = _personae(
        budgets, latest, appended, lambda w: Snapshot.build(
            root, task="Fix the bug", include_git_log=False, profiles=profiles, window=w,
        ),
    )  # fmt: skip
    rows["personae memory, list"] = _personae(
        budgets, latest, ContextWindow, lambda w: Snapshot.build(
            root, messages=msgs, task="Fix the bug", include_git_log=False, profiles=profiles,
            window=w,
        ),
    )  # fmt: skip
    return {"messages": len(msgs), "budgets": len(budgets), "rows": rows}


def _lc_turn(
    lc: list[BaseMessage], counter: Callable[[BaseMessage], int], *, convert: bool
) -> Callable[[int], list[BaseMessage]]:
    """One LangChain call at a budget (``convert``: and the conversion to OpenAI's form)."""

    def turn(b: int) -> list[BaseMessage]:
        kept = trim_messages(
            lc, max_tokens=b, token_counter=counter, strategy="last",
            start_on="human", include_system=True,
        )  # fmt: skip
        if convert:
            convert_to_openai_messages(kept)
        return kept

    return turn


Timed = tuple[Any, float, float]
"""What a timed call gave (a prompt's digest for personae), CPU ms and wall ms."""


def _alternating(
    lc_turn: Callable[[int], list[BaseMessage]],
    turns: Iterator[tuple[int, Callable[[], AssembledContext]]],
    budgets: list[int],
) -> tuple[list[Timed], list[Timed]]:
    """LangChain's calls and personae's timed turns alternating budget by budget, one
    after the other in one process: a drift of the machine's speed (load, frequency,
    caches) meets both sides alike, which two rows timed one after the other do not."""
    theirs: list[Timed] = []
    ours: list[Timed] = []
    _settled()
    for b, (b2, turn) in zip(budgets, turns, strict=True):
        assert b == b2
        theirs.append(_timed(functools.partial(lc_turn, b)))
        ours.append(_timed_digest(turn))
    return theirs, ours


def _langchain(
    lc: list[BaseMessage],
    counter: Callable[[BaseMessage], int],
    budgets: list[int],
    latest: ChatMessage,
    *,
    convert: bool,
    timed: list[Timed] | None = None,
) -> dict[str, Any]:
    """LangChain's row: its calls timed (``timed``: already timed, alternating with
    personae's), then what each kept checked."""
    stats = _new()
    outs: list[tuple[int, list[BaseMessage]]] = []
    turn = _lc_turn(lc, counter, convert=convert)
    if timed is None:
        _settled()
        timed = [_timed(functools.partial(turn, b)) for b in budgets]
    for b, (kept, cpu, wall) in zip(budgets, timed, strict=True):
        stats["cpu"].append(cpu)
        stats["wall"].append(wall)
        outs.append((b, kept))
    whole = sum(counter(m) for m in lc)
    for b, kept in outs:  # checked after timing, as for personae
        used = sum(counter(m) for m in kept)
        stats["overruns"] += used > b
        if whole > b:
            stats["unused"].append((b - used) / b)
        shape = [
            (
                {"human": "user", "ai": "assistant", "tool": "tool"}.get(m.type, m.type),
                getattr(m, "tool_call_id", None)
                if m.type == "tool"
                else (m.id if m.type == "human" else None),
                tuple(c["id"] or "" for c in getattr(m, "tool_calls", []) or []),
            )
            for m in kept
            if m.type != "system"
        ]
        _add(stats, validity(shape, str(latest.seq)))
    return _summary(stats)


def _personae_turns(
    budgets: list[int],
    build: Callable[[ContextWindow], Snapshot],
    window: ContextWindow | None = None,
) -> Iterator[tuple[int, Callable[[], AssembledContext]]]:
    """personae's turns in one window: the first ``next`` runs the warm-up turn (as
    LangChain's counter is warmed: one turn prepares and counts every message)."""
    window = window if window is not None else ContextWindow()

    def turn(b: int) -> AssembledContext:
        return assemble_snapshot(build(window), "agent", Budget.absolute(b), COUNTER)

    turn(60_000)
    _settled()
    for b in budgets:
        yield b, functools.partial(turn, b)


def _timed_digest(turn: Callable[[], AssembledContext]) -> Timed:
    """A turn timed; only its prompt's digest is kept (see :func:`_personae`)."""
    ctx, cpu, wall = _timed(turn)
    return _digest(ctx), cpu, wall


def _personae(
    budgets: list[int],
    latest: ChatMessage,
    new_window: Callable[[], ContextWindow],
    build: Callable[[ContextWindow], Snapshot],
    *,
    timed: list[Timed] | None = None,
) -> dict[str, Any]:
    """Timed turns in one window; then the same turns replayed untimed in a fresh
    window (same budgets in the same order, so the same hints: byte-identical
    prompts, checked by digest) and the replayed prompts checked.

    Only a digest of each timed prompt is kept: keeping 300 prompts of ~200 KB
    alive makes every later turn's render land in fresh memory (page faults counted
    as CPU time, about 0.2 ms a turn here), which no agent loop pays (it sends a
    prompt and drops it). Counting each prompt exactly between two timed turns
    would evict the CPU caches the next turn runs in (LangChain's check is a sum).
    """
    stats = _new()
    stats["replay_mismatches"] = stats["miscounts"] = 0
    if timed is None:
        timed = [_timed_digest(turn) for _, turn in _personae_turns(budgets, build, new_window())]
    digests = [digest for digest, _, _ in timed]
    stats["cpu"] = [cpu for _, cpu, _ in timed]
    stats["wall"] = [wall for _, _, wall in timed]
    shown = len(build(new_window()).messages)  # the history a trimmed prompt shows less of
    turns = _personae_turns(budgets, build, new_window())
    for (b, turn), digest in zip(turns, digests, strict=True):
        ctx = turn()
        stats["replay_mismatches"] += _digest(ctx) != digest
        exact = COUNTER.count(ctx.render())
        stats["overruns"] += exact > b
        stats["miscounts"] += exact != ctx.total  # the total is read off counted parts
        if len(ctx.messages) < shown or any(
            r.rule.endswith("shrunk latest turn") for r in ctx.report().sections
        ):
            stats["unused"].append((b - exact) / b)
        shape = [(m.role, _ident(m), tuple(c.id for c in m.tool_calls)) for m in ctx.messages]
        _add(stats, validity(shape, str(latest.seq)))
    out = _summary(stats)
    out["replay_mismatches"] = stats["replay_mismatches"]
    out["miscounts"] = stats["miscounts"]
    return out


def _digest(ctx: AssembledContext) -> bytes:
    return hashlib.blake2b(ctx.render().encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _ident(m: ChatMessage) -> str | None:
    """What validity() matches: a tool result's call id, a user message's seq."""
    if m.role == "tool":
        return m.tool_call_id
    return str(m.seq) if m.role == "user" else None


def _new() -> dict[str, Any]:
    return {
        "cpu": [], "wall": [], "overruns": 0, "orphans": 0, "dangling": 0, "lost_latest": 0,
        "unused": [],
    }  # fmt: skip


def _add(stats: dict[str, Any], v: dict[str, int]) -> None:
    for k in ("orphans", "dangling", "lost_latest"):
        stats[k] += v[k]


def _summary(stats: dict[str, Any]) -> dict[str, Any]:
    unused = sorted(stats["unused"])
    return {
        "cpu_median_ms": round(statistics.median(stats["cpu"]), 3),
        "cpu_mean_ms": round(statistics.mean(stats["cpu"]), 3),
        "wall_median_ms": round(statistics.median(stats["wall"]), 3),
        "unused_mean": round(statistics.mean(unused), 4) if unused else 0.0,
        "unused_p90": round(unused[int(0.9 * (len(unused) - 1))], 4) if unused else 0.0,
        **{k: stats[k] for k in ("overruns", "orphans", "dangling", "lost_latest")},
    }


Prompts = list[tuple[list[ChatMessage], list[BaseMessage]]]
"""The agent loop's prompts: the personae and the LangChain form of the history."""

CADENCES = {
    "per tool result": ("user", "tool", "last tool"),
    "two per turn": ("user", "last tool"),
    "one per turn": ("user",),
}
"""When the loop sends a prompt: at each user message, after each tool result, after
the last tool result of a turn (a turn without tool calls sends one prompt)."""


DEFAULT_CUT_STEP = SectionSpec.model_fields["cut_step"].default
"""The from-scratch cut grid's step when a profile does not set one."""


def prefix_loop(
    turns: int,
    tmp: Path,
    low_waters: list[float],
    cadences: list[str] | None = None,
    cut_steps: list[float] | None = None,
    *,
    budget: int = 16_000,
) -> dict[str, Any]:
    """Reusable-prefix share, unused budget and CPU per prompt over an agent loop
    (``budget`` tokens, 16k by default), at each cadence of :data:`CADENCES`.

    For personae, one run per ``low_water`` (the eviction hysteresis of a kept
    window: 1.0 evicts only what must go) and one stateless run (a fresh snapshot
    per prompt, no window: its cut points come from the history alone, see the
    ``cut_step`` section setting); the unused share is the mean of 1 - total/budget
    over prompts whose history was trimmed. CPU per prompt: what an appending loop
    pays, new messages counted on both sides (LangChain's ``trim_messages`` with its
    counts cached by message; personae's ``Snapshot.build`` + ``assemble_snapshot``
    + the rendered prompt, the whole list given each time); the checks after each
    prompt are not timed.
    """
    every = _loop_prompts(turns)
    out: dict[str, Any] = {}
    for cadence in cadences or list(CADENCES):
        prompts = [(p, lc) for kind, p, lc in every if kind in CADENCES[cadence]]
        row: dict[str, Any] = {"prompts": len(prompts), "personae": {}}
        row["langchain"] = _langchain_loop(prompts, budget)
        for low in low_waters:
            row["personae"][str(low)] = _personae_loop(
                prompts, tmp / f"{cadence}{low}", low, budget=budget
            )
        row["personae"]["stateless"] = _personae_loop(
            prompts, tmp / f"{cadence}-stateless", 1.0, stateless=True, budget=budget
        )
        for step in cut_steps or []:
            if step == DEFAULT_CUT_STEP:
                continue  # the default row
            row["personae"][f"stateless, cut_step {step}"] = _personae_loop(
                prompts, tmp / f"{cadence}-stateless{step}", 1.0, stateless=True,
                cut_step=step, budget=budget,
            )  # fmt: skip
        out[cadence] = row
    return out


def _loop_prompts(turns: int) -> list[tuple[str, list[ChatMessage], list[BaseMessage]]]:
    """The agent loop's prompts: the history (both forms) at each point a prompt may be
    sent, with what was just appended (``user``, ``tool``, ``last tool``)."""
    rng = random.Random(500)
    texts = Texts(rng)
    msgs: list[ChatMessage] = []
    lc_msgs: list[BaseMessage] = [SystemMessage("You are the builder persona.")]
    prompts: list[tuple[str, list[ChatMessage], list[BaseMessage]]] = []
    for t in range(turns):
        msgs.append(ChatMessage("user", f"turn {t}: " + texts(200), seq=len(msgs) + 1))
        lc_msgs.append(HumanMessage(msgs[-1].content))
        prompts.append(("user", list(msgs), list(lc_msgs)))
        steps = rng.randint(0, 2)
        for step in range(steps):
            ids = [f"t{t}c{k}" for k in range(rng.randint(1, 3))]
            calls = tuple(ChatToolCall(i, "read_file", "{}") for i in ids)
            msgs.append(ChatMessage("assistant", texts(60), tool_calls=calls, seq=len(msgs) + 1))
            lc_calls = [
                {"id": i, "name": "read_file", "args": {}, "type": "tool_call"} for i in ids
            ]
            lc_msgs.append(AIMessage(msgs[-1].content, tool_calls=lc_calls))  # type: ignore[arg-type]
            for n, i in enumerate(ids):
                content = texts(rng.choice([60, 400, 1500]))
                msgs.append(ChatMessage("tool", content, tool_call_id=i, seq=len(msgs) + 1))
                lc_msgs.append(ToolMessage(content, tool_call_id=i))
                last = step == steps - 1 and n == len(ids) - 1
                prompts.append(("last tool" if last else "tool", list(msgs), list(lc_msgs)))
        msgs.append(ChatMessage("assistant", texts(400), seq=len(msgs) + 1))
        lc_msgs.append(AIMessage(msgs[-1].content))
    return prompts


def _langchain_loop(prompts: Prompts, budget: int) -> dict[str, Any]:
    """LangChain's side of the agent loop at ``budget`` tokens."""
    lc_counts: dict[int, int] = {}

    def lc_count(m: BaseMessage) -> int:
        key = id(m)
        if key not in lc_counts:
            lc_counts[key] = COUNTER.count(str(m.content)) + 4
        return lc_counts[key]

    lc_count.__annotations__["m"] = BaseMessage
    lc_renders = []
    lc_unused = []
    lc_cpu = []
    lc_appended = []
    lc_starts: list[object] = []
    lc_trimmed: list[bool] = []
    seen = 0
    for _, lc_now in prompts:
        lc_appended.append(sum(len(f"{m.type}: {m.content}") + 2 for m in lc_now[seen:]))
        seen = len(lc_now)
        trim = functools.partial(
            trim_messages, lc_now, max_tokens=budget, token_counter=lc_count, strategy="last",
            start_on="human", include_system=True,
        )  # fmt: skip
        kept, cpu, _wall = _timed(trim)
        lc_cpu.append(cpu)
        lc_renders.append("\n\n".join(f"{m.type}: {m.content}" for m in kept))
        lc_starts.append(next((id(m) for m in kept if m.type != "system"), None))
        lc_trimmed.append(len(kept) < len(lc_now))
        if lc_trimmed[-1]:
            lc_unused.append(1 - sum(lc_count(m) for m in kept) / budget)
    return {
        **_loop_figures(lc_renders, lc_appended, lc_starts, lc_trimmed),
        "unused_when_trimmed": round(statistics.mean(lc_unused), 3) if lc_unused else 0.0,
        **_cpu_figures(lc_cpu),
    }


def _personae_loop(
    prompts: Prompts,
    root: Path,
    low: float,
    *,
    stateless: bool = False,
    cut_step: float | None = None,
    budget: int = 16_000,
) -> dict[str, Any]:
    """personae's side of the agent loop at ``budget`` tokens and eviction low-water mark ``low``
    (``stateless``: a fresh snapshot per prompt, no window kept; ``cut_step``: the
    from-scratch cut grid's step, ``None`` for the default)."""
    (root / ".personae").mkdir(parents=True)
    step = "" if cut_step is None else f", cut_step: {cut_step}"
    (root / ".personae" / "profiles.yaml").write_text(
        PROFILE.replace(
            "max_messages: 10000000}", f"max_messages: 10000000, low_water: {low}{step}}}"
        ),
        encoding="utf-8",
    )
    profiles = load_profiles(root)
    renders, unused, overruns, cpus = [], [], 0, []
    window = ContextWindow()  # the session's, kept by the loop

    def prompt(now: list[ChatMessage]) -> AssembledContext:
        snap = Snapshot.build(
            root, messages=now, task="Fix the bug", include_git_log=False, profiles=profiles,
            window=None if stateless else window,
        )  # fmt: skip
        ctx = assemble_snapshot(snap, "agent", Budget.absolute(budget), COUNTER)
        ctx.render()
        return ctx

    appended, seen, starts, trimmed = [], 0, [], []
    for now, _ in prompts:
        appended.append(sum(len(render_message(m)) + 2 for m in now[seen:]))
        seen = len(now)
        ctx, cpu, _wall = _timed(functools.partial(prompt, now))
        cpus.append(cpu)
        renders.append(ctx.render())
        starts.append(tuple((m.seq, len(m.content)) for m in ctx.messages[:_FIRST]))
        overruns += ctx.total > budget or COUNTER.count(ctx.render()) != ctx.total
        trimmed.append(len(ctx.messages) < len(now))
        if trimmed[-1]:
            unused.append(1 - ctx.total / budget)
    return {
        **_loop_figures(renders, appended, starts, trimmed),
        "unused_when_trimmed": round(statistics.mean(unused), 3) if unused else 0.0,
        "overruns_or_miscounts": overruns,
        **_cpu_figures(cpus),
    }


def _cpu_figures(cpus: list[float]) -> dict[str, float]:
    """Median and mean CPU milliseconds per prompt."""
    return {
        "cpu_median_ms": round(statistics.median(cpus), 3),
        "cpu_mean_ms": round(statistics.mean(cpus), 3),
    }


_FIRST = 6
"""Messages that tell where a kept conversation starts (their seq and length: a
start moved inside an exchange shortens its outputs)."""

_OPENING = 400
"""Characters that tell where a prompt's conversation starts (head, notice, first
message)."""

UNUSED_LIMIT = 0.05
"""The mean unused share allowed when trimmed (every token used)."""


def _loop_figures(
    renders: list[str], appended: list[int], starts: list[object], trimmed: list[bool]
) -> dict[str, Any]:
    """Prefix share of a loop's prompts and the figures that bound it (the first 20
    prompts skipped; all shares in characters of the rendered prompt).

    - ``share``: mean share of each prompt that the next one repeats as its prefix;
      ``share_trimmed``: the same where the next prompt's history was trimmed (the
      steady state: a loop whose history fits repeats everything); ``trimmed``: the
      share of prompts that were;
      ``share_new``: mean share of each prompt that repeats the previous one's (what a
      provider's prefix cache can serve; at most ``1 - g``);
    - ``share_any``: the same against any earlier prompt (a provider cache holds
      several): the longest common prefix with the previous prompt or the latest
      one that began the same way (its first :data:`_OPENING` characters; a prompt
      beginning otherwise shares less than that);
    - ``g``: mean growth per prompt, characters of the messages appended since the
      previous prompt over the prompt's size;
    - ``moves``: share of prompts after which the conversation's start moved
      (``starts``: what the conversation starts with, per prompt); ``p``: mean share
      of the prompt kept at a move (the part before the first change: the head that
      never changes); ``s``: mean share freed at a move (previous prompt plus what
      was appended, minus the new prompt, over the new prompt); ``other``: mean
      share lost where the start did not move (e.g. a latest turn shortened);
    - ``bound``: ``1 - (g / s) * (1 - p) - other``, the share a loop reaches when
      every move loses all but ``p`` and moves come every ``s / g`` prompts
      (``bound_new``: ``g`` less);
    - ``at_5pct``: the same bound with ``s`` as large as 5% mean unused allows: the
      room free after a move falls by ``g`` a prompt to about nothing before the
      next, so the mean unused share is about ``(s - g / 2) / 2`` and ``s`` at most
      ``0.10 + g / 2``; ``p_for_90``: the head share that bound needs for 0.90.
    """
    pairs = list(itertools.pairwise(zip(renders, appended, starts, strict=True)))
    share, share_new, share_any, growth, kept, freed = [], [], [], [], [], []
    share_trimmed = []
    lost = 0.0
    last_with: dict[str, str] = {}  # the latest prompt beginning the same way
    for n, ((a, _, start_a), (b, app, start_b)) in enumerate(pairs):
        last_with[a[:_OPENING]] = a
        common = common_prefix_length(a, b)
        again = last_with.get(b[:_OPENING], a)
        if n < 20:
            continue
        share.append(common / len(a))
        if trimmed[n + 1]:
            share_trimmed.append(common / len(a))
        share_new.append(common / len(b))
        share_any.append(max(common, common_prefix_length(again, b)) / len(b))
        growth.append(app / len(b))
        if start_a != start_b:
            kept.append(common / len(a))
            freed.append(max(0, len(a) + app - len(b)) / len(b))
        else:
            lost += 1 - common / len(a)
    g = statistics.mean(growth)
    p = statistics.mean(kept) if kept else 1.0
    s = statistics.mean(freed) if freed else 0.0
    other = lost / len(share)
    bound = (1 - g / s * (1 - p) if s else 1.0) - other
    s_max = 2 * UNUSED_LIMIT + g / 2
    return {
        "share": round(statistics.mean(share), 3),
        "share_trimmed": round(statistics.mean(share_trimmed), 3) if share_trimmed else None,
        "trimmed": round(sum(trimmed[21:]) / len(share), 3),
        "share_new": round(statistics.mean(share_new), 3),
        "share_any": round(statistics.mean(share_any), 3),
        "g": round(g, 4),
        "moves": round(len(kept) / len(share), 3),
        "p": round(p, 3),
        "s": round(s, 3),
        "other": round(other, 3),
        "bound": round(bound, 3),
        "bound_new": round(bound - g, 3),
        "at_5pct": round(1 - g / s_max * (1 - p) - other, 3),
        "p_for_90": round(max(0.0, 1 - (0.1 - other) * s_max / g), 3),
    }


DROP_IN_OPTIONS: dict[str, dict[str, Any]] = {
    "last": {"strategy": "last", "start_on": "human", "include_system": True},
    "first": {"strategy": "first"},
}


def _kept_problems(kept: list[BaseMessage], latest: BaseMessage | None) -> tuple[int, int]:
    """(orphan tool results + dangling calls, lost latest human message) of a result."""
    shape = [
        (
            {"human": "user", "ai": "assistant", "tool": "tool"}.get(m.type, m.type),
            getattr(m, "tool_call_id", None) if m.type == "tool" else None,
            tuple(c["id"] or "" for c in getattr(m, "tool_calls", []) or []),
        )
        for m in kept
        if m.type != "system"
    ]
    v = validity(shape, "")
    lost = int(latest is not None and not any(m is latest for m in kept))
    return v["orphans"] + v["dangling"], lost


def drop_in(sizes: list[int], budgets_per_size: int) -> list[dict[str, Any]]:
    """personae's ``trim_messages`` drop-in against LangChain's, same counter, same inputs.

    Counters: ``cached exact`` (per-message, exact counts cached: LangChain's best
    case), ``list, cached exact`` (the same counts behind a list counter: personae
    cannot count per message), ``approximate`` (LangChain's ``count_tokens_approximately``
    passed as the function). The two sides alternate per budget; CPU is the sum over
    the budgets. ``same``: identical results; ``differ`` results must be ones where
    LangChain's is broken (an orphan or dangling call, or the latest human message lost).
    """
    rows: list[dict[str, Any]] = []
    for n in sizes:
        rng = random.Random(n * 7)
        lc = to_langchain(history(n, rng))
        latest = next(m for m in reversed(lc) if m.type == "human")
        cached = cached_counter(lc)

        def as_list(ms: list[BaseMessage], cached: Callable[[BaseMessage], int] = cached) -> int:
            return sum(cached(m) for m in ms)

        counters: dict[str, Any] = {
            "cached exact": cached,
            "list, cached exact": as_list,
            "approximate": count_tokens_approximately,
        }
        full = as_list(lc)
        budgets = [rng.randint(max(50, full // 200), full) for _ in range(budgets_per_size)]
        for (cname, counter), (strategy, options) in itertools.product(
            counters.items(), DROP_IN_OPTIONS.items()
        ):
            row = {"messages": len(lc), "counter": cname, "strategy": strategy,
                   "langchain_cpu_ms": 0.0, "personae_cpu_ms": 0.0, "langchain_wall_ms": 0.0,
                   "personae_wall_ms": 0.0, "same": 0, "differ_langchain_broken": 0,
                   "differ_otherwise": 0, "personae_broken": 0, "langchain_broken": 0}  # fmt: skip
            for b in budgets:
                common = {"max_tokens": b, "token_counter": counter, **options}
                theirs, cpu, wall = _timed(lambda c=common, lc=lc: trim_messages(lc, **c))
                row["langchain_cpu_ms"] += cpu
                row["langchain_wall_ms"] += wall
                ours, cpu, wall = _timed(lambda c=common, lc=lc: personae_trim_messages(lc, **c))
                row["personae_cpu_ms"] += cpu
                row["personae_wall_ms"] += wall
                lost_matters = latest if strategy == "last" else None
                broken_theirs = any(_kept_problems(theirs, lost_matters))
                row["langchain_broken"] += broken_theirs
                row["personae_broken"] += any(_kept_problems(ours, lost_matters))
                if ours == theirs:
                    row["same"] += 1
                elif broken_theirs:
                    row["differ_langchain_broken"] += 1
                else:
                    row["differ_otherwise"] += 1
            row["ratio_cpu"] = row["personae_cpu_ms"] / max(row["langchain_cpu_ms"], 1e-9)
            rows.append(row)
    return rows


def print_drop_in(rows: list[dict[str, Any]], budgets: int) -> None:
    print(f"trim_messages drop-in vs LangChain's, same counter, {budgets} budgets per size "
          "(CPU ms summed; ratio = personae / langchain)")  # fmt: skip
    print(f"{'messages':>9} {'counter':<19}{'strategy':<9}{'lc cpu':>9}{'ours cpu':>9}"
          f"{'ratio':>7}{'same':>6}{'lc bad':>7}{'other':>6}{'our bad':>8}")  # fmt: skip
    for r in rows:
        print(
            f"{r['messages']:>9,} {r['counter']:<19}{r['strategy']:<9}"
            f"{r['langchain_cpu_ms']:>9.1f}{r['personae_cpu_ms']:>9.1f}{r['ratio_cpu']:>7.2f}"
            f"{r['same']:>6}{r['differ_langchain_broken']:>7}{r['differ_otherwise']:>6}"
            f"{r['personae_broken']:>8}"
        )


def print_sizes(sizes: list[dict[str, Any]]) -> None:
    """The per-size table."""
    cols = (
        f"{'cpu ms':>9}{'mean':>7}{'wall ms':>9}{'unused':>8}{'p90':>7}{'overrun':>8}"
        f"{'orphan':>7}{'dangl':>6}{'lost':>5}{'replay':>7}{'miscnt':>7}"
    )
    print(f"{'messages':>9} {'side':<26}{cols}")
    for size in sizes:
        for name, r in size["rows"].items():
            times = (
                f"{r['cpu_median_ms']:>9.2f}{r['cpu_mean_ms']:>7.2f}{r['wall_median_ms']:>9.2f}"
                f"{r['unused_mean']:>8.1%}{r['unused_p90']:>7.1%}"
            )
            checks = (
                f"{r['overruns']:>8}{r['orphans']:>7}{r['dangling']:>6}{r['lost_latest']:>5}"
                f"{r.get('replay_mismatches', '-'):>7}{r.get('miscounts', '-'):>7}"
            )
            print(f"{size['messages']:>9,} {name:<26}{times}{checks}")


def print_loops(loops: dict[str, Any], turns: int, budget: int = 16_000) -> None:
    """The agent-loop table, one block per cadence."""
    for cadence, loop in loops.items():
        print(
            f"agent loop: {turns} turns, {cadence}: {loop['prompts']} prompts,"
            f" {budget // 1000}k budget"
            " (share: the previous prompt's share the next repeats; trim: the same over trimmed"
            " prompts, trimmed: their share of prompts; new: the next prompt's"
            " share repeated; any: the same against any earlier prompt; unused: budget left"
            " when trimmed; g p s moves other bound: see _loop_figures)"
        )
        print(
            f"  {'side':<34}{'share':>6}{'trim':>6}{'trimd':>6}{'new':>6}{'any':>6}"
            f"{'unused':>7}{'g':>7}{'p':>6}{'s':>6}"
            f"{'moves':>6}{'other':>6}{'bound':>6}{'at 5%':>6}{'p for .9':>9}{'cpu ms':>7}"
        )
        sides = {"langchain": loop["langchain"]}
        sides.update(
            {
                f"personae {low if low.startswith('stateless') else f'low_water {low}'}": r
                for low, r in loop["personae"].items()
            }
        )
        for side, r in sides.items():
            print(
                f"  {side:<34}{r['share']:>6.3f}{r['share_trimmed'] or 0:>6.3f}"
                f"{r['trimmed']:>6.2f}{r['share_new']:>6.3f}{r['share_any']:>6.3f}"
                f"{r['unused_when_trimmed']:>7.1%}{r['g']:>7.1%}{r['p']:>6.2f}{r['s']:>6.2f}"
                f"{r['moves']:>6.2f}{r['other']:>6.2f}{r['bound']:>6.2f}{r['at_5pct']:>6.2f}{r['p_for_90']:>9.2f}"
                f"{r['cpu_median_ms']:>7.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="100 and 1k messages, 40 budgets, 60 turns"
    )
    ap.add_argument("--budgets", type=int, default=300, help="random budgets at 100 and 1k")
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument(
        "--low-water", type=float, nargs="+", default=[1.0, 0.9, 0.8, 0.7],
        help="eviction low-water marks compared in the agent loop",
    )  # fmt: skip
    ap.add_argument(
        "--drop-in", action="store_true",
        help="only the trim_messages drop-in comparison (100, 1k, 10k messages)",
    )  # fmt: skip
    ap.add_argument("--drop-in-budgets", type=int, default=20, help="budgets per size")
    ap.add_argument("--sizes", type=int, nargs="+", help="history sizes (default: 100 to 100k)")
    ap.add_argument(
        "--cadence", nargs="+", choices=list(CADENCES), help="agent-loop cadences (default: all)"
    )
    ap.add_argument("--no-drop-in", action="store_true", help="skip the drop-in comparison")
    ap.add_argument(
        "--cut-step", type=float, nargs="*", default=[0.25],
        help="stateless agent-loop rows at these cut_step values (besides the default)",
    )  # fmt: skip
    ap.add_argument(
        "--user-count-cache", action="store_true",
        help="use the user's on-disk count cache (default: an empty one in a private data"
        " folder, so no earlier run's counts are found)",
    )  # fmt: skip
    ap.add_argument(
        "--loop-budget", type=int, default=16_000, help="the agent loop's budget in tokens"
    )
    ap.add_argument(
        "--alternate", action="store_true",
        help="time LangChain's cached-exact calls and personae's stateless calls alternately,"
        " budget by budget (both sides meet the same machine state; steadier ratios)",
    )  # fmt: skip
    ap.add_argument(
        "--budget-range", type=int, nargs=2, default=[500, 20_000], metavar=("LOW", "HIGH"),
        help="random budgets at every size are drawn from LOW..HIGH tokens (default: 500 20000)",
    )  # fmt: skip
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "vs_langchain.json")
    args = ap.parse_args()
    home = tempfile.TemporaryDirectory()
    if not args.user_count_cache:
        os.environ["PERSONAE_HOME"] = home.name
    try:
        _run(args)
    finally:
        os.environ["PERSONAE_COUNT_CACHE"] = "off"  # nothing left to write at exit
        home.cleanup()


def _run(args: argparse.Namespace) -> None:
    """The benchmark ``main`` parsed the options of."""
    if args.drop_in:
        results_d = {"load_average": os.getloadavg(),
                     "drop_in": drop_in([100, 1_000, 10_000], args.drop_in_budgets)}  # fmt: skip
        results_d["load_average_after"] = os.getloadavg()
        print(f"load average {results_d['load_average'][0]:.2f}"
              f" (after {results_d['load_average_after'][0]:.2f})")  # fmt: skip
        print_drop_in(results_d["drop_in"], args.drop_in_budgets)
        out = args.out.with_name("vs_langchain_drop_in.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results_d, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {out}")
        return
    rng = random.Random(15)
    plan = {100: args.budgets, 1_000: args.budgets, 10_000: 40, 100_000: 8}
    if args.quick:
        plan = {100: 40, 1_000: 40}
        args.turns = 60
    if args.sizes:
        plan = {n: plan.get(n, args.budgets) for n in args.sizes}
    results: dict[str, Any] = {
        "load_average": os.getloadavg(), "sizes": [],
        "count_cache": "user" if args.user_count_cache else "empty, private",
        "stateless_first": True, "alternating": args.alternate,
        "budget_range": args.budget_range,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for n, k in plan.items():
            budgets = [rng.randint(*args.budget_range) for _ in range(k)]
            results["sizes"].append(bench_size(n, budgets, Path(tmp), alternate=args.alternate))
        if args.turns:
            results["prefix_share"] = prefix_loop(
                args.turns, Path(tmp), args.low_water, args.cadence, args.cut_step,
                budget=args.loop_budget,
            )  # fmt: skip
            results["loop_budget"] = args.loop_budget
    if not args.no_drop_in:
        results["drop_in"] = drop_in([100, 1_000, 10_000], args.drop_in_budgets)
    results["load_average_after"] = os.getloadavg()
    before, after = results["load_average"][0], results["load_average_after"][0]
    print(f"load average {before:.2f} (after {after:.2f})")
    print(
        f"budgets {args.budget_range[0]:,} to {args.budget_range[1]:,} tokens;"
        " on-disk count cache: "
        + ("the user's" if args.user_count_cache else "empty at start (private data folder)")
        + "; personae stateless runs before the other personae rows (their cuts and counts"
        " are not in the process yet); mean: CPU ms mean; miscnt: prompts whose total is"
        " not the exact count of the whole prompt"
        + (
            "; langchain (cached exact) and personae stateless timed alternately, budget by budget"
            if args.alternate
            else ""
        )
    )
    print_sizes(results["sizes"])
    print_loops(results.get("prefix_share", {}), args.turns, args.loop_budget)
    if "drop_in" in results:
        print_drop_in(results["drop_in"], args.drop_in_budgets)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
