"""A fresh store opened by many real processes at once: no failures (SQLite and PostgreSQL).

Every round starts worker processes at a barrier so their first opens of the
same new file really race (migrations, WAL switch, schema check). The CLI
test starts real ``python -m personae handover create`` processes on a fresh
project at once. ``bench/bench_first_open.py`` runs the full figures (240
opens, 80 CLI commands); the tests keep smaller counts so CI stays fast.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _pg import PgServer
from personae.store.db import Store, _migrations, split_sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _race_start import spawn_at_start_line

ROUNDS = 30
"""Fresh databases per test run."""
WORKERS = 8
"""Processes racing on each fresh database (30 x 8 = 240 synchronized first opens)."""
CLI_PROCESSES = 12
"""Parallel CLI commands in the test (the bench runs 80)."""
PG_ROUNDS = 10
"""Fresh PostgreSQL databases raced on (10 x 8 = 80 synchronized first opens)."""


def _opener(paths: list[tuple[str, str | None]], barrier: Any, results: Any) -> None:
    """Wait at the barrier, then open (and migrate) each fresh database once."""
    for path, url in paths:
        barrier.wait(timeout=60)
        try:
            with Store(path, url=url) as store:
                names = store.applied_migrations()
            results.put(("ok", path, len(names)))
        except Exception as exc:  # every failure is counted, none hidden
            results.put(("fail", path, f"{type(exc).__name__}: {exc}"))


def race_first_opens(
    folder: Path, rounds: int, workers: int, urls: list[str] | None = None
) -> list[tuple[str, str, Any]]:
    """``rounds`` fresh databases, each opened by ``workers`` processes at one barrier.

    With ``urls`` (one empty PostgreSQL database per round) the stores are on the server.
    """
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers)
    results = ctx.Queue()
    paths = [
        (str(folder / f"r{i}" / "state.db"), None if urls is None else urls[i])
        for i in range(rounds)
    ]
    procs = [ctx.Process(target=_opener, args=(paths, barrier, results)) for _ in range(workers)]
    for proc in procs:
        proc.start()
    out = [results.get(timeout=120) for _ in range(rounds * workers)]
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0, proc.exitcode
    return out


def test_synchronized_first_opens_never_fail(tmp_path: Path) -> None:
    out = race_first_opens(tmp_path, ROUNDS, WORKERS)
    failures = [o for o in out if o[0] != "ok"]
    assert len(out) == ROUNDS * WORKERS == 240
    assert failures == []
    # Every database ends with every migration recorded exactly once.
    with Store(tmp_path / "r0" / "state.db") as store:
        applied = store.applied_migrations()
    assert {o[2] for o in out} == {len(applied)}
    for i in range(ROUNDS):
        with Store(tmp_path / f"r{i}" / "state.db") as store:
            assert store.applied_migrations() == applied
            assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_synchronized_first_opens_on_postgres_never_fail(
    tmp_path: Path, pg_server: PgServer
) -> None:
    urls = [pg_server.database(migrated=False) for _ in range(PG_ROUNDS)]
    try:
        out = race_first_opens(tmp_path, PG_ROUNDS, WORKERS, urls)
        assert [o for o in out if o[0] != "ok"] == []
        assert len(out) == PG_ROUNDS * WORKERS
        expected = [name for _, name, _ in _migrations()]
        assert {o[2] for o in out} == {len(expected)}
        for url in urls:
            with Store(":memory:", url=url) as store, store.read() as conn:
                rows = conn.execute("SELECT name FROM schema_migrations ORDER BY number")
                assert [r[0] for r in rows.fetchall()] == expected  # each recorded once
    finally:
        for url in urls:
            pg_server.drop(url)


def test_reopen_after_partial_schema_is_idempotent(open_store: Callable[[], Store]) -> None:
    # A table of a later migration already exists (an older run died after its
    # CREATE but before recording it): the migration still applies cleanly.
    with open_store() as store:
        applied = store.applied_migrations()
        with store.transaction() as conn:
            conn.execute("DELETE FROM schema_migrations WHERE name = ?", (applied[-1],))
    with open_store() as again:
        assert again.applied_migrations() == applied


def race_cli(project: Path, count: int, marks: Path) -> list[tuple[int, str]]:
    """``count`` real ``personae handover create`` commands released at one start line."""
    env = {**os.environ, "COLUMNS": "120"}
    commands = [["handover", "create", "--to", "researcher", "--task", f"task {i}"]
                for i in range(count)]  # fmt: skip
    procs, go = spawn_at_start_line(commands, cwd=project, env=env, marks=marks)
    go.touch()
    failed = []
    for proc in procs:
        _out, err = proc.communicate(timeout=300)
        if proc.returncode != 0:
            failed.append((proc.returncode, err.strip()[-300:]))
    return failed


@pytest.mark.process
def test_parallel_cli_commands_on_a_fresh_project(tmp_path: Path, store_env: str | None) -> None:
    # On PostgreSQL the commands find the server through PERSONAE_DATABASE_URL.
    project = tmp_path / "project"
    (project / ".personae").mkdir(parents=True)  # a project whose store does not exist yet
    assert race_cli(project, CLI_PROCESSES, tmp_path / "marks") == []
    with Store(project / ".personae" / "state.db") as store, store.read() as conn:
        rows = conn.execute("SELECT count(*) FROM handover_ledger").fetchone()[0]
        assert store.dialect == ("sqlite" if store_env is None else "postgres")
    assert rows == CLI_PROCESSES


def test_every_create_in_a_migration_is_idempotent() -> None:
    # A migration re-run over a half-applied schema must not fail: CREATE ... IF NOT EXISTS.
    sqlite, postgres = _migrations("sqlite"), _migrations("postgres")
    assert [n for n, _, _ in sqlite] == [n for n, _, _ in postgres]  # same numbers, both
    for _number, name, sql in sqlite + postgres:
        for statement in split_sql(sql):
            body = "\n".join(
                line for line in statement.splitlines() if not line.strip().startswith("--")
            ).strip()
            if body.upper().startswith("CREATE"):
                assert "IF NOT EXISTS" in body.upper().split("(")[0], (name, body[:80])
