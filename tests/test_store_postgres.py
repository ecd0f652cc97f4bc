"""PostgreSQL as the shared store: how it is chosen, what happens when it is not there,
and that nothing optional is imported where it must not be. Real server (``tests/_pg.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from personae.errors import UnknownNameError
from personae.mind.bootstraps import ProcessId, bootstrap_scope, find_bootstrap
from personae.mind.index import MindIndex
from personae.store import Store, StoreError
from personae.store.conversations import ConversationStore, Message
from personae.tokens import exact_counter


def _project(tmp_path: Path, config: str = "") -> Path:
    folder = tmp_path / "project" / ".personae"
    folder.mkdir(parents=True)
    if config:
        (folder / "config.yaml").write_text(config)
    return folder / "state.db"


def test_config_database_url_puts_the_project_store_in_postgres(
    tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PERSONAE_DATABASE_URL", raising=False)
    db = _project(tmp_path, f"database_url: '{pg_database}'\n")
    with Store(db) as store:
        assert store.dialect == "postgres" and store.url == pg_database
        conv = ConversationStore(store, exact_counter("o200k_base"))
        sid = conv.create_session(session_id="shared")
        conv.append(sid, Message("user", "stored on the server"))
    assert not db.exists()  # no SQLite file beside the config
    with Store(":memory:", url=pg_database) as direct:
        conv = ConversationStore(direct, exact_counter("o200k_base"))
        assert [m.content for m in conv.recent("shared")] == ["stored on the server"]
        # The per-turn probe of the context window reads the same row on PostgreSQL.
        count, last = conv.position("shared")
        assert count == 1 and last == conv.session("shared").last_seq and last >= 1
        with pytest.raises(UnknownNameError):
            conv.position("no-such-session")


def test_environment_wins_over_config_and_sqlite_is_the_default(
    tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PERSONAE_DATABASE_URL", raising=False)
    plain = _project(tmp_path / "a")
    with Store(plain) as store:
        assert store.dialect == "sqlite"
    assert plain.is_file()
    db = _project(tmp_path / "b", "database_url: postgresql://nobody@/nowhere?host=/nonexistent\n")
    monkeypatch.setenv("PERSONAE_DATABASE_URL", pg_database)
    with Store(db) as store:
        assert store.url == pg_database


def test_an_unreachable_server_is_one_clear_error_without_the_password() -> None:
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        Store(":memory:", url="postgresql://me:s3cret@/personae?host=/nonexistent-socket-dir")
    message = str(caught.value)
    assert "cannot open postgresql database personae on /nonexistent-socket-dir" in message
    assert "s3cret" not in message
    assert time.monotonic() - started < 10


def test_a_bad_config_value_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERSONAE_DATABASE_URL", raising=False)
    db = _project(tmp_path, "database_url: [1, 2]\n")
    with pytest.raises(StoreError, match=r"config.yaml: database_url must be text"):
        Store(db)


def test_a_bad_pool_size_is_refused(pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERSONAE_DATABASE_POOL_SIZE", "zero")
    with pytest.raises(StoreError, match="PERSONAE_DATABASE_POOL_SIZE"):
        Store(":memory:", url=pg_database)


def test_import_personae_and_the_gate_never_import_psycopg(pg_database: str) -> None:
    probe = (
        "import sys, personae, personae.hosts.gate, personae.store.bootstraps\n"
        "print(sorted(m for m in sys.modules if m.startswith('psycopg')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PERSONAE_DATABASE_URL": pg_database, "PATH": "/usr/bin:/bin",
             "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")},
    )  # fmt: skip
    assert out.stdout.strip() == "[]"


def test_the_gate_reads_bootstraps_from_postgres_and_fails_closed(
    tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _project(tmp_path)
    monkeypatch.setenv("PERSONAE_DATABASE_URL", pg_database)
    host = ProcessId(pid=4242, started=123456789012)  # a start time past 32 bits
    assert find_bootstrap(db, session_id="s1")[0] is False
    scope = bootstrap_scope(db)
    with Store(db) as store:
        MindIndex(store).record_bootstrap("s1", "hash", None, scope)
        MindIndex(store).record_bootstrap(None, "hash", (host.pid, host.started), scope)
    assert find_bootstrap(db, session_id="s1") == (
        True,
        "bootstrap_session succeeded (recorded for this session)",
    )
    assert find_bootstrap(db, host=host)[0] is True
    # A session id is the only key when the host gives one: the host's row does not count.
    assert find_bootstrap(db, session_id="other")[0] is False
    # Another project on the same database: its gate finds none of these rows.
    other = _project(tmp_path / "other")
    assert find_bootstrap(other, session_id="s1")[0] is False
    assert find_bootstrap(other, host=host)[0] is False
    assert not db.exists()
    monkeypatch.setenv("PERSONAE_DATABASE_URL", "postgresql://x@/gone?host=/nonexistent-dir")
    ok, reason = find_bootstrap(db, session_id="s1")
    assert ok is False and "PostgreSQL store unreachable" in reason


def _hook_input(cwd: Path, session: str) -> bytes:
    payload = {
        "session_id": session,
        "transcript_path": str(cwd / "missing-transcript.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
    }
    return json.dumps(payload).encode()


_GATE = [sys.executable, "-m", "personae", "hook", "pre-tool-use", "--gate", "Bash"]


def _gate(project: Path, session: str) -> subprocess.CompletedProcess[bytes]:
    """The real hook gate process in ``project`` for a Bash call of ``session``.

    The gate's budget on PostgreSQL (4 s) includes importing psycopg (~0.12 s idle; 1.2-1.6 s
    at load 10): out of time it denies, fail-closed, saying so. Only that denial is
    retried; any other answer counts."""
    env = {k: v for k, v in os.environ.items() if k != "PERSONAE_DATABASE_URL"}
    for _ in range(5):
        done = subprocess.run(
            _GATE, input=_hook_input(project, session), capture_output=True, env=env,
            timeout=60, check=False,
        )  # fmt: skip
        if b"could not decide within" not in done.stderr:
            break
    return done


def test_the_hook_gate_process_on_a_postgres_project(tmp_path: Path, pg_database: str) -> None:
    # The project's config names the database; the hook process reads it from there.
    db = _project(tmp_path, f"database_url: '{pg_database}'\n")
    project = db.parent.parent
    with Store(db) as store:
        MindIndex(store).record_bootstrap("s-pg", "hash", None, bootstrap_scope(db))
    allowed = _gate(project, "s-pg")
    assert allowed.returncode == 0, allowed.stderr
    other = _gate(project, "s-other")
    assert other.returncode == 2 and b"no recorded bootstrap" in other.stderr, other.stderr
    # The server gone (a URL nobody answers): blocked, with the reason, within seconds.
    (db.parent / "config.yaml").write_text(
        "database_url: postgresql://x@/gone?host=/nonexistent-dir\n"
    )
    down = _gate(project, "s-pg")
    assert down.returncode == 2 and b"PostgreSQL store unreachable" in down.stderr
    assert not db.exists()


def test_a_bootstrap_in_one_project_unlocks_nothing_in_another_on_the_same_database(
    tmp_path: Path, pg_database: str
) -> None:
    """Two projects share one PostgreSQL database (both configs name it). A session
    bootstraps through project A's real mind server (``personae serve`` over stdio; the
    session id comes as Codex sends it, in the call's ``_meta``); the gate of project B
    blocks the same session id, project A's gate allows it."""
    config = f"database_url: '{pg_database}'\n"
    a, b = (_project(tmp_path / name, config).parent.parent for name in ("a", "b"))
    (a / ".personae" / "mind.md").write_text("# Ada\n\nYou are Ada.\n", encoding="utf-8")
    (a / ".personae" / "memory").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PERSONAE_DATABASE_URL"}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "personae", "serve"], cwd=str(a), env=env
    )

    async def bootstrap() -> dict[str, Any]:
        with anyio.fail_after(120), open(tmp_path / "serve.log", "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                meta = {"sessionId": "s-shared"}
                result = await session.call_tool("bootstrap_session", {}, meta=meta)
                return dict(result.structured_content or {})

    packet = anyio.run(bootstrap)
    assert packet.get("mind_contract_available") is True, packet
    allowed = _gate(a, "s-shared")
    assert allowed.returncode == 0, allowed.stderr
    blocked = _gate(b, "s-shared")
    assert blocked.returncode == 2, blocked.stderr
    assert b"no recorded bootstrap for this session" in blocked.stderr, blocked.stderr
    assert not (a / ".personae" / "state.db").exists()  # the rows are in PostgreSQL


def test_cli_commands_read_a_postgres_store_without_a_file(
    tmp_path: Path, pg_database: str
) -> None:
    project = tmp_path / "project"
    (project / ".personae").mkdir(parents=True)  # a project whose store is on PostgreSQL
    env = {**os.environ, "PERSONAE_DATABASE_URL": pg_database, "COLUMNS": "120"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "personae", *args], cwd=project, env=env,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    created = cli("handover", "create", "--to", "researcher", "--task", "find the dates")
    assert created.returncode == 0, created.stderr
    ledger = cli("handover", "ledger", "--json")
    assert ledger.returncode == 0, ledger.stderr
    entries = json.loads(ledger.stdout)
    assert [e["task"] for e in entries] == ["find the dates"]
    runs = cli("runs", "list", "--json")
    assert runs.returncode == 0 and json.loads(runs.stdout) == []
    assert not (project / ".personae" / "state.db").exists()
