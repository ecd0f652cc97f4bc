"""A process killed in the middle of an append leaves no half-written message; concurrent
writer processes get unique, contiguous seqs. On SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from personae.store import Store
from personae.store.conversations import ConversationStore, Message
from personae.tokens import exact_counter

CHILD = textwrap.dedent(
    """
    import os, sys
    from personae.store import Store
    from personae.store.conversations import ConversationStore, Message
    from personae.tokens import exact_counter

    store = Store(sys.argv[1])
    # The process dies inside the append transaction, after rows were written.
    store.conn.create_function("die", 0, lambda: os._exit(9))
    store.conn.execute(
        "CREATE TEMP TRIGGER crash AFTER INSERT ON main.messages"
        " WHEN NEW.content = 'last of batch' BEGIN SELECT die(); END"
    )
    conv = ConversationStore(store, exact_counter("o200k_base"))
    conv.append_many(sys.argv[2], [
        Message("user", "first of batch"),
        Message("assistant", "second of batch"),
        Message("user", "last of batch"),
    ])
    print("not reached")
    """
)

# PostgreSQL: the trigger sleeps on the last row of the batch; the process exits once the
# server reports that sleep (rows of the batch are written, the transaction still open).
PG_CHILD = textwrap.dedent(
    """
    import os, sys, threading, time
    import psycopg
    from personae.store import Store
    from personae.store.conversations import ConversationStore, Message

    from personae.tokens import exact_counter

    store = Store(sys.argv[1])
    with store.transaction() as conn:
        conn.execute(
            "CREATE FUNCTION crash() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF NEW.content = 'last of batch' THEN PERFORM pg_sleep(60); END IF;"
            " RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER crash AFTER INSERT ON messages FOR EACH ROW EXECUTE FUNCTION crash()"
        )
    conv = ConversationStore(store, exact_counter("o200k_base"))
    threading.Thread(target=conv.append_many, daemon=True, args=(sys.argv[2], [
        Message("user", "first of batch"),
        Message("assistant", "second of batch"),
        Message("user", "last of batch"),
    ])).start()
    with psycopg.connect(store.url, autocommit=True) as probe:
        for _ in range(600):
            if probe.execute(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep'"
            ).fetchone():
                os._exit(9)
            time.sleep(0.05)
    print("not reached")
    """
)


def test_killed_mid_append_leaves_store_consistent(
    tmp_path: Path, open_store: Callable[[], Store], store_env: str | None
) -> None:
    path = tmp_path / "state.db"
    with open_store() as store:
        conv = ConversationStore(store, exact_counter("o200k_base"))
        sid = conv.create_session()
        conv.append(sid, Message("user", "committed before the crash"))
    # PostgreSQL: the server checks every 100 ms whether the dead client is still there.
    env = {**os.environ, "PGOPTIONS": "-c client_connection_check_interval=100"}
    result = subprocess.run(
        [sys.executable, "-c", CHILD if store_env is None else PG_CHILD, str(path), sid],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert result.returncode == 9, result.stderr
    assert "not reached" not in result.stdout
    with open_store() as store:
        if store.dialect == "sqlite":
            assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conv = ConversationStore(store, exact_counter("o200k_base"))
        assert [m.content for m in conv.recent(sid, 10)] == ["committed before the crash"]
        session = conv.session(sid)
        assert (session.message_count, session.last_seq) == (1, 1)
        with store.read() as conn:
            rows = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        assert rows == 1
        assert conv.append(sid, Message("user", "after restart")) == 2


WRITER = textwrap.dedent(
    """
    import sys
    from personae.store import Store
    from personae.store.conversations import ConversationStore, Message, ToolCall
    from personae.tokens import exact_counter

    store = Store(sys.argv[1])
    conv = ConversationStore(store, exact_counter("o200k_base"))
    me = sys.argv[3]
    for i in range(int(sys.argv[4])):
        conv.append_many(sys.argv[2], [
            Message("assistant", "", [ToolCall(f"{me}-{i}", "read_file", {"i": i})]),
            Message("tool", f"result {me} {i}", tool_call_id=f"{me}-{i}"),
        ])
    """
)


def test_concurrent_writers_get_unique_contiguous_seqs(
    tmp_path: Path, open_store: Callable[[], Store], store_env: str | None
) -> None:
    path = tmp_path / "state.db"  # writers on PostgreSQL find it through PERSONAE_DATABASE_URL
    with open_store() as store:
        sid = ConversationStore(store, exact_counter("o200k_base")).create_session()
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), sid, name, "60"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("w1", "w2", "w3")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=180)
        assert writer.returncode == 0, err
    with open_store() as store:
        conv = ConversationStore(store, exact_counter("o200k_base"))
        messages = conv.between(sid)
        assert [m.seq for m in messages] == list(range(1, 361))
        assert conv.count(sid) == 360
        # Each batch stayed together: every tool result directly follows its call.
        for call, result in zip(messages[::2], messages[1::2], strict=True):
            assert call.role == "assistant" and result.role == "tool"
            assert result.tool_call_id == call.tool_calls[0].id
