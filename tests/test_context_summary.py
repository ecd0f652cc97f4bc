"""Path A's condensed summary through the scripted replay server: only newly evicted
messages are sent, the cap is enforced, the summary is stored, and any model error
falls back to path B with the reason in the report."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_ai.models import override_allow_model_requests

from _helpers import run_async
from _profile_run import SCENARIO, personae
from personae.context.summary import SUMMARY_CAP, refresh_summary
from personae.models.resolve import ModelResolver
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.team.summarizer import model_summarize
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
LONG = "The user asked for the March report; the analyst read sales.csv and found 42 rows. " * 40


def _scenario(path: Path, *, summary: str | None) -> str:
    rules = [{"when": {"role": "summarizer"}, "text": summary}] if summary is not None else []
    path.write_text(
        yaml.safe_dump({"description": "summaries (scripted)", "steps": [], "rules": rules})
        if rules
        else yaml.safe_dump({"description": "no summaries (scripted)", "rules": [
            {"when": {"role": "manager"}, "text": "x"}]}),
        encoding="utf-8",
    )  # fmt: skip
    return f"scripted:{path}"


def _fill(conv: ConversationStore, sid: str, start: int, turns: int) -> None:
    for t in range(start, start + turns):
        conv.append(sid, Message("user", f"question {t}"))
        conv.append(
            sid,
            Message("assistant", "", tool_calls=[{"id": f"c{t}", "name": "grep", "args": {}}]),
        )
        conv.append(sid, Message("tool", f"result {t}", tool_call_id=f"c{t}"))
        conv.append(sid, Message("assistant", f"answer {t}"))


@contextlib.contextmanager
def _session(tmp_path: Path, summary: str | None) -> Iterator[tuple[Any, str, Any, list[Any]]]:
    """A stored 5-turn session and an async summarizer through the scripted server."""
    models = ModelResolver(default=_scenario(tmp_path / "s.yaml", summary=summary))
    seen: list[tuple[str, ...]] = []

    async def call(request: str) -> str:
        seen.append(tuple(line for line in request.splitlines() if line.startswith("[")))
        return await model_summarize(models, None, request)

    try:
        with Store(tmp_path / "state.db") as store, override_allow_model_requests(True):
            conv = ConversationStore(store, COUNTER)
            sid = conv.create_session(title="t")
            _fill(conv, sid, 0, 5)
            yield conv, sid, call, seen
    finally:
        models.close()


def test_condensed_summary_is_capped_stored_and_incremental(tmp_path: Path) -> None:
    with _session(tmp_path, LONG) as (conv, sid, call, seen):
        first = run_async(refresh_summary(conv, sid, COUNTER, call, recent=6))
        assert first.ok and first.folded > 0 and first.summary is not None
        assert COUNTER.count(first.summary) <= SUMMARY_CAP < COUNTER.count(LONG)
        assert "[summary cut to its cap]" in first.summary
        stored = conv.latest_summary(sid, counter=COUNTER)
        assert stored is not None and stored.text == first.summary
        assert "[user] question 0" in seen[0]
        # Nothing new evicted: no model call at all.
        again = run_async(refresh_summary(conv, sid, COUNTER, call, recent=6))
        assert again.ok and again.folded == 0 and len(seen) == 1
        # Two more turns: only the newly evicted exchanges are sent.
        _fill(conv, sid, 5, 2)
        third = run_async(refresh_summary(conv, sid, COUNTER, call, recent=6))
        assert third.ok and third.folded > 0 and len(seen) == 2
        assert not any("question 0" in line for line in seen[1])
        assert any("question 4" in line or "question 5" in line for line in seen[1])
        newest = conv.latest_summary(sid, counter=COUNTER)
        assert newest is not None and newest.covers_seq > stored.covers_seq


def test_model_error_falls_back_to_path_b(tmp_path: Path) -> None:
    with _session(tmp_path, None) as (conv, sid, call, _):
        out = run_async(refresh_summary(conv, sid, COUNTER, call, recent=6))
        assert not out.ok and out.warning is not None and "path B" in out.warning
        assert conv.latest_summary(sid, counter=COUNTER) is None  # nothing stored


def _steps_with_summary(summary: str | None) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(SCENARIO))
    if summary is not None:
        data["rules"] = [{"when": {"role": "summarizer"}, "text": summary}]
    return data


@pytest.mark.parametrize("with_summary", [True, False])
def test_runs_use_the_model_summary_or_report_the_fallback(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch, with_summary: bool
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    root = tmp_path / "proj"
    root.mkdir()
    personae(root, "init")
    scenario = tmp_path / "s.yaml"
    text = "SUMMARY-FROM-MODEL: the user wants monthly reports."
    scenario.write_text(yaml.safe_dump(_steps_with_summary(text if with_summary else None)))
    spec = f"scripted:{scenario}"
    for _ in range(3):  # enough exchanges that older ones leave the recent window
        personae(root, "run", "01-march-report", "--persona", "analyst", "--model", spec,
                 "--session", "s1", "--json")  # fmt: skip
    runs = json.loads(personae(root, "runs", "list", "--json").stdout)
    shown = json.loads(personae(root, "runs", "show", runs[0]["id"], "--json").stdout)
    manager = next(c for c in shown["model_calls"] if c["role"] == "manager")
    report = manager["budget"]
    summaries = [c for c in shown["model_calls"] if c["role"] == "summarizer"]
    if with_summary:
        assert report["history_path"] == "A"
        assert "<conversation_summary>\nSUMMARY-FROM-MODEL" in manager["context_text"]
        # The summary's model call is stored like the others and counts in the run's usage.
        assert len(summaries) == 1 and shown["model_calls"][0]["role"] == "summarizer"
        call = summaries[0]
        assert call["answer"]["text"].startswith("SUMMARY-FROM-MODEL")
        assert "[user]" in call["context_text"] and call["usage"]["step"] == 1
        assert call["budget"]["role"] == "summarizer" and call["usage"]["counted_input_tokens"] > 0
        assert shown["run"]["usage"]["requests"] == len(shown["model_calls"])
        text_view = personae(root, "runs", "show", runs[0]["id"]).stdout
        assert "summarizer" in text_view
    else:
        assert report["history_path"] == "B"
        assert any("summary model call failed" in w for w in report["warnings"])
