"""A migrated store has exactly the recorded schema, on SQLite and on PostgreSQL.

``tests/data/store_schema/<backend>.txt`` is the schema a fresh database gets from the
migrations: SQLite's ``sqlite_master`` text byte for byte, PostgreSQL's catalog (columns
with types, defaults, identity and generated expressions; constraints; indexes; relations).
A change to a migration, or to how migrations are prepared for a backend, that alters what
a database ends up with fails here. After an intended schema change, regenerate with
``PERSONAE_WRITE_SCHEMA=1`` and review the diff.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from personae.store import Store

EXPECTED = Path(__file__).parent / "data" / "store_schema"

_PG_CATALOG = [
    (
        "relation",
        "SELECT relname, relkind FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        " ORDER BY relname",
    ),
    (
        "column",
        "SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),"
        " a.attnotnull, a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid)"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
        " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'"
        " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum",
    ),
    (
        "constraint",
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
    ),
    (
        "index",
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
    ),
    (
        "sequence",
        "SELECT sequencename, data_type::text, start_value, increment_by FROM pg_sequences"
        " WHERE schemaname = 'public' ORDER BY 1",
    ),
]


def _schema(store: Store) -> str:
    """The store's schema as text, one line per object (see the module docstring)."""
    if store.dialect == "sqlite":
        rows = store.fetchall("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid")
        return "".join(f"{r[0]} {r[1]} on {r[2]}:\n{r[3]}\n\n" for r in rows)
    lines = []
    for kind, sql in _PG_CATALOG:
        lines += [f"{kind}: " + " | ".join(map(str, row)) for row in store.fetchall(sql)]
    return "\n".join(lines) + "\n"


def test_a_migrated_store_has_the_recorded_schema(
    open_store: Callable[[], Store], backend: str
) -> None:
    expected = EXPECTED / f"{backend}.txt"
    with open_store() as store:
        actual = _schema(store)
    if os.environ.get("PERSONAE_WRITE_SCHEMA") == "1":
        expected.parent.mkdir(parents=True, exist_ok=True)
        expected.write_text(actual, encoding="utf-8")
    assert actual == expected.read_text(encoding="utf-8")
