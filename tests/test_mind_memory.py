"""Memory files, the cached catalog, recall (FTS5/bm25 on SQLite, tsvector/ts_rank on
PostgreSQL) and the journal. Tests that touch the index run on both backends."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personae.errors import UsageError
from personae.mind import MindService
from personae.mind.index import MindIndex, fts_query
from personae.mind.memory import MemoryDir, MemoryFileError, parse_memory
from personae.store.db import Store
from personae.store.mind import JournalEntry


def _mem(title: str, description: str, mtype: str, body: str, **extra: str) -> str:
    lines = [f"name: {title}", f"description: {description}", f"type: {mtype}"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "---\n" + "\n".join(lines) + "\n---\n" + body + "\n"


def _notes(folder: Path, count: int) -> Path:
    """``folder`` with ``count`` note memories ``m0.md`` ... (titles ``M0`` ...)."""
    folder.mkdir()
    for i in range(count):
        (folder / f"m{i}.md").write_text(_mem(f"M{i}", "d", "note", "body"), encoding="utf-8")
    return folder


@pytest.fixture
def service(tmp_path: Path, open_store: Callable[[], Store]) -> MindService:
    prompt = tmp_path / "mind.md"
    prompt.write_text("contract\n", encoding="utf-8")
    return MindService(tmp_path / "memory", prompt, open_store())


def test_write_validates_and_updates_the_index(service: MindService) -> None:
    result = service.write_memory_file(
        "deploy.md", _mem("Deploy rules", "how releases are cut", "project", "Tag then push.")
    )
    assert result == {
        "name": "deploy.md",
        "type": "project",
        "bytes": result["bytes"],
        "index_updated": True,
    }
    index = (service.memory.root / "MEMORY.md").read_text(encoding="utf-8")
    assert "- [Deploy rules](deploy.md) - how releases are cut" in index
    service.write_memory_file("deploy.md", _mem("Deploy rules", "v2", "project", "x"))
    index = (service.memory.root / "MEMORY.md").read_text(encoding="utf-8")
    assert index.count("(deploy.md)") == 1 and "v2" in index
    assert service.read_memory_file("deploy.md")["description"] == "v2"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("../evil.md", _mem("a", "b", "c", "d"), "invalid memory file name"),
        ("sub/evil.md", _mem("a", "b", "c", "d"), "invalid memory file name"),
        ("notes.txt", _mem("a", "b", "c", "d"), "invalid memory file name"),
        (".hidden.md", _mem("a", "b", "c", "d"), "invalid memory file name"),
        ("x.md", "no frontmatter at all", "frontmatter block"),
        ("x.md", "---\nname: a\ntype: b\n---\nbody", "missing description"),
        ("x.md", "---\nname: [unclosed\n---\nbody", "malformed YAML"),
        ("x.md", "---\nname: a\n", "not closed"),
    ],
)
def test_bad_writes_fail_cleanly(
    service: MindService, name: str, content: str, message: str
) -> None:
    with pytest.raises(MemoryFileError, match=message):
        service.write_memory_file(name, content)
    root = service.memory.root
    assert not root.exists() or sorted(os.listdir(root)) in ([], [".memory.lock"])


def test_symlink_out_of_the_folder_is_refused(service: MindService, tmp_path: Path) -> None:
    service.memory.root.mkdir(parents=True)
    (tmp_path / "outside.md").write_text("secret", encoding="utf-8")
    os.symlink(tmp_path / "outside.md", service.memory.root / "link.md")
    with pytest.raises(MemoryFileError, match="outside the memory directory"):
        service.read_memory_file("link.md")
    assert "link.md" not in service.memory.scan()


def test_read_missing_names_the_file(service: MindService) -> None:
    with pytest.raises(MemoryFileError, match=r"no memory file named 'nope\.md'"):
        service.read_memory_file("nope.md")


def test_catalog_rereads_only_changed_files(
    tmp_path: Path, open_store: Callable[[], Store]
) -> None:
    mem = _notes(tmp_path / "memory", 5)
    index = MindIndex(open_store())
    folder = MemoryDir(mem)
    first = index.sync(folder)
    assert (first.added, first.unchanged) == (5, 0)
    assert index.sync(folder).unchanged == 5
    (mem / "m1.md").write_text(_mem("M1", "d", "user", "changed body!"), encoding="utf-8")
    (mem / "m4.md").unlink()
    (mem / "m9.md").write_text(_mem("M9", "d", "note", "new"), encoding="utf-8")
    stats = index.sync(folder)
    assert (stats.added, stats.updated, stats.removed, stats.unchanged) == (1, 1, 1, 3)
    total, counts, _ = index.catalog(folder)
    assert total == 5 and counts == {"note": 4, "user": 1}


def test_recall_bm25_or_semantics_boosts_and_facets(service: MindService) -> None:
    service.write_memory_file(
        "portal.md",
        _mem("Portal launch", "portal project plan", "project", "Dates.", project="portal"),
    )
    service.write_memory_file(
        "misc.md", _mem("Misc", "various", "note", "the portal was mentioned once in passing")
    )
    service.write_memory_file("user.md", _mem("Brandon", "sponsor", "user", "Likes tea."))
    hits = service.recall("portal")["results"]
    assert [h["name"] for h in hits[:2]] == ["portal.md", "misc.md"]  # title/description boost
    either = {h["name"] for h in service.recall("tea launch")["results"]}  # OR semantics
    assert {"portal.md", "user.md"} <= either
    assert [h["name"] for h in service.recall("portal", facet="type:user")["results"]] == []
    assert [h["name"] for h in service.recall("likes", facet="type:user")["results"]] == ["user.md"]
    assert [h["name"] for h in service.recall("", facet="project:portal")["results"]] == [
        "portal.md"
    ]
    assert service.recall("zzzz-nothing")["results"] == []
    with pytest.raises(UsageError, match="key:value"):
        service.recall("x", facet="nocolon")
    with pytest.raises(UsageError, match="k must be"):
        service.recall("x", k=0)


def test_recall_excerpts_fit_the_token_budget(service: MindService) -> None:
    for i in range(10):
        body = "filler words here. " * 400 + f"the needle {i} sits here. " + "more text. " * 400
        service.write_memory_file(f"big{i}.md", _mem(f"Big {i}", "large", "note", body))
    result = service.recall("needle", k=10)
    assert len(result["results"]) == 10
    assert result["tokens_used"] <= result["token_budget"]
    assert all("needle" in r["excerpt"] for r in result["results"])


def test_observe_and_reflect_are_verbatim_and_recallable(service: MindService) -> None:
    args = {"command": "rm -rf build/ && deploy --prod", "note": "ünïcode ✓"}
    observed = service.observe("Bash", args)
    assert observed["kind"] == "tool_call"
    assert "destructive: destructive file removal (rm -r/-f)" in observed["cautionary_flags"]
    row = service.index.journal_entry(observed["id"])
    assert row is not None and row["tool_name"] == "Bash"
    assert '"note":"ünïcode ✓"' in str(row["args"])
    after = service.observe("Bash", args, result="Error: permission denied")
    assert after["kind"] == "tool_result"
    assert any(f.startswith("result:") for f in after["cautionary_flags"])
    said = service.reflect("The user prefers squash merges on portal work", "user_said")
    hits = service.recall("squash merges")["results"]
    assert hits[0]["source"] == "journal" and "squash merges" in hits[0]["excerpt"]
    assert (
        service.recall("squash", facet="kind:user_said")["results"][0]["name"]
        == f"journal/{said['id']}"
    )
    with pytest.raises(UsageError, match="kind must be one of"):
        service.reflect("x", "gossip")
    with pytest.raises(UsageError, match="must not be empty"):
        service.reflect("   ", "internal")


def test_observe_surfaces_feedback_memories_and_secrets(service: MindService) -> None:
    service.write_memory_file(
        "force.md", _mem("Never force push", "team rule about git push", "feedback", "Ask first.")
    )
    result = service.observe("Bash", {"command": "git push --force origin main"})
    assert any("force push" in f for f in result["cautionary_flags"])
    assert any("Never force push" in f for f in result["cautionary_flags"])
    assert result["relevant_memories"][0]["name"] == "force.md"
    leaked = service.reflect("my api_key = sk-abcdefghijklmnopqrstuvwx123", "user_said")
    assert any(f.startswith("secret:") for f in leaked["cautionary_flags"])


def test_list_memory_files_pages_and_filters(service: MindService) -> None:
    for i in range(7):
        service.write_memory_file(f"n{i}.md", _mem(f"N{i}", "d", "note" if i % 2 else "user", "b"))
    page = service.list_memory_files(limit=3)
    assert page["total_count"] == 8 and page["truncated"] is True  # 7 + MEMORY.md
    assert [f["name"] for f in page["files"]] == ["MEMORY.md", "n0.md", "n1.md"]
    users = service.list_memory_files(type="user")
    assert users["total_count"] == 4 and not users["truncated"]


def test_context_reads_commitments_by_facet_too(service: MindService) -> None:
    service.write_memory_file(
        "goals.md",
        _mem(
            "Goals",
            "open items",
            "project",
            "- [ ] finish gate\n- [x] done thing\n* second",
            context="commitments",
        ),
    )
    assert service.context()["open_commitments"] == ["finish gate", "second"]


def test_fts_query_quotes_words() -> None:
    assert fts_query('portal "launch" OR NEAR(') == '"portal" OR "launch" OR "or" OR "near"'
    assert fts_query("  !! ") is None


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_fts_query_never_breaks_sqlite(text: str) -> None:
    query = fts_query(text)
    if query is None:
        return
    store = Store(":memory:")
    store.conn.execute("SELECT rowid FROM mind_fts WHERE mind_fts MATCH ?", (query,)).fetchall()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=200))
def test_recall_of_any_text_never_breaks_the_index(
    tmp_path: Path, open_store: Callable[[], Store], text: str
) -> None:
    with open_store() as store:
        index = MindIndex(store)
        memory = MemoryDir(tmp_path / "memory")
        index.add_journal(memory, JournalEntry("observe", "a portal note with some words"))
        hits = index.search(memory, text, k=3)
        assert all(h.source == "journal" for h in hits)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_parse_memory_never_raises(text: str) -> None:
    entry = parse_memory("x.md", text)
    assert isinstance(entry.type, str) and entry.type


def test_two_servers_on_one_store_keep_one_row_per_file(
    tmp_path: Path, open_store: Callable[[], Store]
) -> None:
    prompt = tmp_path / "mind.md"
    prompt.write_text("c\n", encoding="utf-8")
    mem = tmp_path / "memory"
    a = MindService(mem, prompt, open_store())
    b = MindService(mem, prompt, open_store())
    a.write_memory_file("x.md", _mem("X", "d", "note", "one"))
    a.sync(force=True)
    b.write_memory_file("x.md", _mem("X", "d", "user", "two two"))
    (mem / "y.md").write_text(_mem("Y", "d", "note", "y"), encoding="utf-8")
    b.sync(force=True)
    a.sync(force=True)
    with a.index.store.read() as conn:
        rows = conn.execute(
            "SELECT name, count(*) FROM mind_docs WHERE source = 'memory' GROUP BY name"
        ).fetchall()
    assert {r[0]: r[1] for r in rows} == {"MEMORY.md": 1, "x.md": 1, "y.md": 1}
    assert a.bootstrap(None, [])["memory_catalog"]["category_counts"] == {
        "index": 1,
        "note": 1,
        "user": 1,
    }


def test_near_universal_words_do_not_drown_the_query(service: MindService) -> None:
    for i in range(60):
        service.write_memory_file(f"c{i}.md", _mem(f"C{i}", "common", "note", "common words"))
    service.write_memory_file("rare.md", _mem("Rare", "common", "note", "common zebra"))
    hits = service.recall("common zebra", k=3)["results"]
    assert hits[0]["name"] == "rare.md"
    assert len(service.recall("common", k=3)["results"]) == 3  # a lone word is kept


def test_concurrent_syncs_from_two_connections_leave_no_duplicates(
    tmp_path: Path, open_store: Callable[[], Store]
) -> None:
    mem = _notes(tmp_path / "memory", 150)
    prompt = tmp_path / "mind.md"
    prompt.write_text("c\n", encoding="utf-8")
    services = [MindService(mem, prompt, open_store()) for _ in range(2)]
    errors: list[BaseException] = []

    def sync(service: MindService) -> None:
        try:
            service.sync(force=True)
        except BaseException as exc:
            errors.append(exc)

    for round_ in range(3):
        for i in range(0, 150, 7):
            (mem / f"m{i}.md").write_text(
                _mem(f"M{i}", "d", "user", "changed " * (round_ + 2)), encoding="utf-8"
            )
        threads = [threading.Thread(target=sync, args=(s,)) for s in services]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        with services[0].index.store.read() as conn:
            rows = conn.execute(
                "SELECT count(*), count(DISTINCT name) FROM mind_docs WHERE source = 'memory'"
            ).fetchone()
            fts = conn.execute("SELECT count(*) FROM mind_fts").fetchone()
        assert tuple(rows) == (150, 150)
        assert fts[0] == 150


def test_context_is_bounded(service: MindService) -> None:
    for _ in range(12):
        service.reflect("long " * 5_000, "internal")
    service.write_memory_file(
        "commitments.md", _mem("C", "open items", "project", "- item\n" * 100)
    )
    context = service.context()
    assert len(context["recent_journal"]) <= 10
    assert all(len(n["text"]) <= 300 for n in context["recent_journal"])
    assert len(context["open_commitments"]) <= 20
    # The journal itself keeps the whole text.
    assert len(str(service.index.journal_entry(1)["text"])) == len("long " * 5_000)


def test_memory_dir_that_is_a_file(tmp_path: Path, open_store: Callable[[], Store]) -> None:
    prompt = tmp_path / "mind.md"
    prompt.write_text("c\n", encoding="utf-8")
    not_a_dir = tmp_path / "memory"
    not_a_dir.write_text("oops", encoding="utf-8")
    service = MindService(not_a_dir, prompt, open_store())
    packet = service.bootstrap(None, [])
    assert packet["memory_catalog"]["total_count"] == 0
    assert any("memory directory not found" in r for r in packet["degraded_mode"]["reasons"])
    with pytest.raises(MemoryFileError, match="cannot write"):
        service.write_memory_file("a.md", _mem("A", "d", "note", "b"))
