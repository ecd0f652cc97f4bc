"""The bootstrap packet: contents and degraded mode, plus the size bound and the required keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personae.mind import ERROR_PREFIX, REQUIRED_KEYS, MindService
from personae.mind.bootstraps import HostCall
from personae.mind.contract import Contract
from personae.mind.packet import (
    MAX_PACKET_CHARS,
    JournalNote,
    MemoryCatalog,
    MindContext,
    build_packet,
    packet_chars,
)
from personae.store.db import Store

TOOLS = ["bootstrap_session", "observe", "reflect", "recall"]


def _write(folder: Path, name: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(body, encoding="utf-8")


@pytest.fixture
def prompt(tmp_path: Path) -> Path:
    path = tmp_path / "prompt" / "mind.md"
    _write(path.parent, "mind.md", "FULL VOICE CONTRACT\n")
    return path


def _service(tmp_path: Path, mem: Path, prompt: Path) -> MindService:
    return MindService(mem, prompt, Store(tmp_path / "state.db"))


def test_four_files_give_total_and_category_counts(tmp_path: Path, prompt: Path) -> None:
    mem = tmp_path / "memory"
    _write(mem, "MEMORY.md", "# Index\n- [Brandon](user_brandon.md) - sponsor context\n")
    _write(mem, "user_brandon.md", "---\nname: Brandon\ntype: user\n---\nUser profile")
    _write(
        mem,
        "running_commitments.md",
        "---\nname: Commitments\ntype: project\n---\n- Ship bootstrap",
    )
    _write(mem, "carry_forward.md", "---\nname: Carry\ntype: session\n---\n- Continue context work")
    packet = _service(tmp_path, mem, prompt).bootstrap("s1", TOOLS)
    assert packet["schema_version"] == 1
    assert packet["session_id"] == "s1"
    assert packet["mind_contract"] == "FULL VOICE CONTRACT\n"
    assert packet["mind_contract_available"] is True
    assert packet["degraded_mode"] == {"mind_contract_available": True, "reasons": []}
    assert packet["required_first_call"] == "bootstrap_session"
    assert {"observe", "reflect", "recall"} <= set(packet["available_mind_tools"])
    assert packet["context"]["open_commitments"] == ["Ship bootstrap"]
    assert packet["context"]["recent_carry_forward"] == ["Continue context work"]
    catalog = packet["memory_catalog"]
    assert catalog["total_count"] == 4
    assert catalog["index_present"] is True
    assert catalog["category_counts"] == {"index": 1, "project": 1, "session": 1, "user": 1}
    assert "MCP server instructions" in packet["host_limitations"][0]


def test_205_notes_and_one_user_no_filenames(tmp_path: Path, prompt: Path) -> None:
    mem = tmp_path / "memory"
    for i in range(205):
        _write(mem, f"memory_{i:03d}.md", "---\nname: M\ntype: note\n---\nbody")
    _write(mem, "user_brandon.md", "---\nname: Brandon\ntype: user\n---\nbody")
    packet = _service(tmp_path, mem, prompt).bootstrap("s1", TOOLS)
    catalog = packet["memory_catalog"]
    assert catalog["total_count"] == 206
    assert catalog["category_counts"] == {"note": 205, "user": 1}
    assert "files" not in catalog
    text = json.dumps(packet)
    assert "memory_0" not in text and "user_brandon" not in text


def test_category_comes_from_frontmatter_not_filename(tmp_path: Path, prompt: Path) -> None:
    mem = tmp_path / "memory"
    _write(mem, "user_looks_like_user.md", "---\nname: X\ntype: feedback\n---\nbody")
    _write(mem, "no_header.md", "just text")
    counts = _service(tmp_path, mem, prompt).bootstrap(None, TOOLS)["memory_catalog"]
    assert counts["category_counts"] == {"feedback": 1, "unknown": 1}


def test_broken_include_is_degraded(tmp_path: Path) -> None:
    prompt = tmp_path / "agent_system.md"
    prompt.write_text("@include missing.md\n", encoding="utf-8")
    service = _service(tmp_path, tmp_path / "memory", prompt)
    packet = service.bootstrap(None, ["bootstrap_session"])
    assert packet["mind_contract_available"] is False
    assert packet["degraded_mode"]["mind_contract_available"] is False
    assert packet["degraded_mode"]["reasons"][0].startswith("mind contract unavailable")
    assert packet["mind_contract"].startswith(ERROR_PREFIX)
    assert packet["mind_contract"] == service.system_prompt()


def test_missing_memory_dir_is_a_reason_not_a_crash(tmp_path: Path, prompt: Path) -> None:
    packet = _service(tmp_path, tmp_path / "nope", prompt).bootstrap(None, TOOLS)
    assert packet["memory_catalog"]["total_count"] == 0
    assert any("memory directory not found" in r for r in packet["degraded_mode"]["reasons"])


def test_required_keys_and_unknown_fields_allowed(tmp_path: Path, prompt: Path) -> None:
    packet = _service(tmp_path, tmp_path / "memory", prompt).bootstrap(None, TOOLS)
    assert set(REQUIRED_KEYS) <= set(packet)
    assert packet["schema_version"] == 1
    # Extra fields beyond schema v1's required keys are additive (clients ignore them).
    assert set(packet) - set(REQUIRED_KEYS) == {"contract_hash", "generated_at"}


def test_packet_is_bounded_whatever_the_memory(tmp_path: Path) -> None:
    prompt = tmp_path / "mind.md"
    prompt.write_text("voice " * 20_000, encoding="utf-8")  # 120,000 chars
    mem = tmp_path / "memory"
    for i in range(300):  # 300 distinct categories
        _write(mem, f"m{i}.md", f"---\nname: M{i}\ndescription: d\ntype: kind{i}\n---\nbody")
    _write(mem, "commitments.md", "---\nname: c\ntype: project\n---\n" + "- item\n" * 500)
    service = _service(tmp_path, mem, prompt)
    packet = service.bootstrap(None, TOOLS)
    assert packet_chars(packet) <= MAX_PACKET_CHARS
    assert len(packet["memory_catalog"]["category_counts"]) <= 41
    assert sum(packet["memory_catalog"]["category_counts"].values()) == 301
    assert packet["mind_contract_available"] is True
    assert "get_system_prompt()" in packet["mind_contract"]
    assert len(service.system_prompt()) == 120_000


def test_successful_bootstrap_is_recorded(tmp_path: Path, prompt: Path) -> None:
    store = Store(tmp_path / "state.db")
    service = MindService(tmp_path / "memory", prompt, store)
    # The host names the session (Codex: in the call's _meta); the model's argument binds
    # nothing (it is only echoed when the host names none).
    packet = service.bootstrap("sess-1", TOOLS, HostCall(meta={"sessionId": "host-1"}))
    assert packet["session_id"] == "host-1"
    assert service.bootstrap("model-says", TOOLS)["session_id"] == "model-says"
    rows = store.conn.execute("SELECT session_id, contract_hash FROM mind_bootstraps").fetchall()
    digest = service.contract().hash
    assert [(r[0], r[1]) for r in rows] == [("host-1", digest), (None, digest)]
    prompt.unlink()
    service.bootstrap("sess-2", TOOLS, HostCall(meta={"sessionId": "host-2"}))  # degraded
    assert store.conn.execute("SELECT count(*) FROM mind_bootstraps").fetchone()[0] == 2


@settings(max_examples=40, deadline=None)
@given(
    contract=st.text(max_size=60_000),
    counts=st.dictionaries(
        st.text(max_size=120) | st.text(max_size=5).map(lambda t: "x" * 60 + t),
        st.integers(0, 10**9),
        max_size=400,
    ),
    items=st.lists(st.text(max_size=2_000), max_size=80),
)
def test_build_packet_is_bounded_for_any_input(
    contract: str, counts: dict[str, int], items: list[str]
) -> None:
    context = MindContext(
        open_commitments=items,
        recent_carry_forward=items,
        recent_journal=[
            JournalNote(id=i, kind="user_said", text=t, created_at="now")
            for i, t in enumerate(items)
        ],
        last_bootstrap_at=None,
    )
    packet = build_packet(
        session_id="s",
        contract=Contract(text=contract, available=True),
        available_mind_tools=["bootstrap_session"],
        context=context,
        catalog=MemoryCatalog(
            total_count=sum(counts.values()), index_present=False, category_counts=counts
        ),
        generated_at="now",
    )
    assert packet_chars(packet) <= MAX_PACKET_CHARS
    assert set(REQUIRED_KEYS) <= set(packet)
    assert sum(packet["memory_catalog"]["category_counts"].values()) == sum(counts.values())
