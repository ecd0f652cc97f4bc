"""What the store keeps of a run's tool calls and conversation: bounded and redacted.

A huge tool argument used to be stored whole in the tool_call event, again in the
work_result event and again in the conversation (a 20 MiB argument made an 84 MB
state.db), and the conversation kept the task's secrets that the run tables
redact. Both backends (SQLite and PostgreSQL, ``open_store``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from personae.limits import ARG_KEEP_CHARS, cut_strings
from personae.store import Store
from personae.store.conversations import ConversationStore, Message, ToolCall
from personae.tokens import exact_counter
from personae.tools.records import ToolCallRecord

SECRET_TASK = "load postgres://admin:hunter2pass@db.example/prod with token=abc123SECRETxyz"
HUGE = 3 * 1024 * 1024


def test_conversation_rows_are_redacted_and_arguments_cut(
    open_store: Callable[[], Store],
) -> None:
    with open_store() as store:
        conv = ConversationStore(store, exact_counter("o200k_base"))
        sid = conv.create_session(title=SECRET_TASK)
        big = "B" * HUGE
        conv.append_many(sid, [
            Message("user", SECRET_TASK),
            Message("assistant", "", [ToolCall("c1", "write_file",
                                               {"path": "x", "content": big,
                                                "api_key": "sk-live-0123456789abcdef"})]),
            Message("tool", "written", tool_call_id="c1"),
        ])  # fmt: skip
        with store.transaction() as conn:
            rows = conn.execute("SELECT content, tool_calls FROM messages").fetchall()
            titles = conn.execute("SELECT title FROM sessions").fetchall()
    raw = json.dumps([list(r) for r in rows]) + json.dumps([list(t) for t in titles])
    for secret in ("hunter2pass", "abc123SECRETxyz", "sk-live-0123456789abcdef"):
        assert secret not in raw
    assert "[REDACTED" in rows[0][0] and "[REDACTED" in titles[0][0]
    call = json.loads(rows[1][1])[0]
    assert len(call["args"]["content"]) < ARG_KEEP_CHARS + 100
    assert call["args"]["content"].endswith(f"[cut: {HUGE - ARG_KEEP_CHARS} more characters]")
    assert len(raw) < 20_000


def test_a_call_record_keeps_a_cut_copy_but_sees_the_whole_call() -> None:
    args = {"content": "A" * HUGE, "path": "big.txt"}
    record = ToolCallRecord.made("write_file", args, ok=False, text="refused")
    assert record.args["path"] == "big.txt"
    assert len(record.args["content"]) < ARG_KEEP_CHARS + 100
    assert "cut:" in record.args["content"]
    # Loop detection still compares the whole call: a different tail is a different call.
    other = ToolCallRecord.made("write_file", {**args, "content": "A" * (HUGE - 1) + "B"},
                                ok=False, text="refused")  # fmt: skip
    assert other.canonical_args != record.canonical_args
    assert cut_strings({"a": ["x" * 5]}, keep=2) == {"a": ["xx… [cut: 3 more characters]"]}


PERSONA = """---
name: writer
description: Writes files.
tools: [write_file]
---
You write files.
"""


@pytest.mark.process
def test_one_run_with_a_huge_argument_stays_small(tmp_path: Path) -> None:
    """`personae run`: a 3 MiB write_file argument, then the whole run's store is small."""
    root = tmp_path / "proj"
    (root / ".personae" / "personas").mkdir(parents=True)
    (root / ".personae" / "personas" / "writer.md").write_text(PERSONA)
    big = "Z" * HUGE
    scenario = {"steps": [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Write it"}]}},
        {"when": {"role": "worker"},
         "tool_calls": [{"name": "write_file", "args": {"path": "big.txt", "content": big}}]},
        {"when": {"role": "worker"}, "text": "wrote it"},
        {"when": {"role": "validator"}, "output": {
            "approved": True, "requirements_met": True, "issues": [],
            "completion_signal": {"confidence": "high", "progress_made": True}}},
        {"when": {"role": "manager"}, "text": "DONE"},
    ]}  # fmt: skip
    (root / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERSONAE_")}
    done = subprocess.run(
        [sys.executable, "-m", "personae", "run", SECRET_TASK, "--persona", "writer", "--json",
         "--model", "scripted:scenario.yaml"],
        cwd=root, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert (root / "big.txt").stat().st_size == HUGE  # the tool got the whole argument
    db = root / ".personae" / "state.db"
    size = sum(p.stat().st_size for p in db.parent.glob("state.db*"))
    assert size < 1_000_000, size  # was over 3 copies of the argument
    text = db.read_bytes().decode("latin-1")
    assert "hunter2pass" not in text and "abc123SECRETxyz" not in text
    with sqlite3.connect(db) as conn:
        calls = [json.loads(r[0]) for r in conn.execute(
            "SELECT data_json FROM run_events WHERE kind = 'tool_call'")]  # fmt: skip
    kept = calls[0]["args"]["content"]
    assert kept.startswith("Z" * ARG_KEEP_CHARS) and kept.endswith("more characters]")
    assert len(done.stdout) < 200_000
