"""The history fit's shortcut for a latest turn over the room (no start is chosen, the
turn is shrunk) gives what the general path gives: every fit compared with the
shortcut switched off, over histories, limits and every setting that chooses a start."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from _helpers import HISTORY_TEXTS, with_oversized_turn
from personae.context import history as history_mod
from personae.context.history import HistoryFit, fit_history
from personae.context.messages import ChatMessage, ChatToolCall
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
NOTICE = "[{messages} earlier messages ({omitted} tokens) omitted]"


def _history(rng: random.Random, turns: int) -> list[ChatMessage]:
    msgs: list[ChatMessage] = []
    for turn in range(turns):
        ask = f"turn {turn}" + rng.choice(("", ": " + rng.choice(HISTORY_TEXTS)[:200]))
        msgs.append(ChatMessage("user", ask, seq=len(msgs) + 1))
        calls = tuple(ChatToolCall(f"c{turn}.{k}", "read", "{}") for k in range(rng.randint(1, 3)))
        msgs.append(ChatMessage("assistant", "reading", tool_calls=calls, seq=len(msgs) + 1))
        for call in calls:
            output = (rng.choice(HISTORY_TEXTS) * rng.randint(1, 4))[: rng.choice((60, 400, None))]
            msgs.append(ChatMessage("tool", output, tool_call_id=call.id, seq=len(msgs) + 1))
        if rng.random() < 0.5:
            msgs.append(ChatMessage("assistant", rng.choice(HISTORY_TEXTS)[:300],
                                    seq=len(msgs) + 1))  # fmt: skip
    return msgs


def _fit(ex: history_mod.Exchanges, limit: int, setting: tuple[object, ...]) -> HistoryFit:
    keep_from, cut_step, low_water, earlier, max_messages = setting
    return fit_history(
        ex, COUNTER, limit=limit, max_messages=max_messages, earlier=earlier, notice=NOTICE,
        batch=8, keep_from=keep_from, low_water=low_water, cut_step=cut_step,
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
def test_a_turn_over_the_room_is_fitted_as_the_general_path_fits_it(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    output = rng.choice(HISTORY_TEXTS) * rng.randint(2, 30)
    ex = with_oversized_turn(_history(rng, rng.randint(8, 30)), output, COUNTER)
    turn = ex.turn_tokens
    total = ex.cum_cost[-1]
    limits = sorted(
        {rng.randint(20, total + 200) for _ in range(25)} | {turn - 1, *range(turn, turn + 400, 9)}
    )
    hints = (None, ex.heads[len(ex.heads) // 3], ex.heads[1])
    settings = list(itertools.product(hints, (0.0, 0.08), (1.0, 0.8), (0, 3), (None, 12)))
    real = history_mod._turn_alone_over
    taken = []

    def counted(*args: object) -> bool:
        taken.append(real(*args))  # type: ignore[arg-type]
        return taken[-1]

    for limit in (lim for lim in limits if lim > 0):
        for setting in settings:
            with monkeypatch.context() as m:
                m.setattr(history_mod, "_turn_alone_over", counted)
                fast = _fit(ex, limit, setting)
            with monkeypatch.context() as m:
                m.setattr(history_mod, "_turn_alone_over", lambda *_: False)
                slow = _fit(ex, limit, setting)
            assert fast == slow, (limit, setting)
    assert any(taken) and not all(taken), sum(taken)


@pytest.mark.parametrize("seed", range(4))
def test_a_start_on_the_grid_is_fitted_as_it_was_fitted_anew(seed: int) -> None:
    """Fits that start on a cut grid point are kept by what decides them (the start,
    the cut exchange, the notice): every limit gets what a fit of exchanges that kept
    nothing gives, and limits that share a grid point share one fit."""
    rng = random.Random(seed)
    ex = with_oversized_turn(_history(rng, rng.randint(20, 40)), "done", COUNTER)
    total = ex.cum_cost[-1]
    limits = [rng.randint(ex.turn_tokens + 50, total) for _ in range(60)]
    shared = 0
    for cut_step, earlier in itertools.product((0.08, 0.25), (0, 3)):
        setting = (None, cut_step, 1.0, earlier, None)
        for limit in limits:
            fresh = dataclasses.replace(ex, notices={}, on_grid={})
            anew = _fit(fresh, limit, setting)
            kept = _fit(ex, limit, setting)
            assert kept == anew, (limit, setting)
            if any(fitted is kept for _, fitted in ex.on_grid.values()):
                assert _fit(ex, limit, setting) is kept  # read back, not fitted again
                shared += _fit(ex, limit + 1, setting) is kept
    assert ex.on_grid and shared > 20, shared
