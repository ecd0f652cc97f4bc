"""Exact token counts remembered on disk by content, for the next process.

A fresh process assembling a history an earlier process assembled reads the counts
instead of counting (and its prompt is byte-identical); a cache file that is not a
database is made again; the cache can be turned off; it stays bounded; processes
writing at once do not fail.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from personae.context import _diskcounts

CHILD = r"""
import hashlib, json, random, sys
from pathlib import Path
from personae.context import Budget, ChatMessage, Snapshot, assemble_snapshot, load_profiles
from personae.tokens.exact import ExactCounter

class Counting(ExactCounter):
    # The exact counter, noting how many long texts its encoding had to encode (a count,
    # or the token offsets a message's count is taken from).
    __slots__ = ("long",)
    def __init__(self):
        super().__init__("o200k_base")
        self.long = 0
        encode = self.encoding.encode_ordinary
        def counted(text):
            self.long += len(text) > 64
            return encode(text)
        self.encoding.encode_ordinary = counted

root = Path(sys.argv[1])
rng = random.Random(4)
words = ["alpha", "beta", "日本語", "x/y", "{\"k\": 1}", "ERROR", "\n"]
msgs = []
for i in range(120):
    text = f"message {i}: " + " ".join(rng.choice(words) for _ in range(rng.randint(20, 400)))
    msgs.append(ChatMessage("user" if i % 2 == 0 else "assistant", text, seq=i + 1))
counter = Counting()
snap = Snapshot.build(root, messages=msgs, task="t", include_git_log=False,
                      profiles=load_profiles(root))
ctx = assemble_snapshot(snap, "agent", Budget.absolute(6000), counter)
print(json.dumps({"long": counter.long, "total": ctx.total,
                  "digest": hashlib.sha256(ctx.render().encode()).hexdigest()}))
"""

PROFILE = (
    "roles:\n  agent:\n    sections:\n      - task\n"
    "      - {tag: recent_messages, cap: 1000000, max_messages: 1000000}\n"
)


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".personae").mkdir(parents=True)
    (root / ".personae" / "profiles.yaml").write_text(PROFILE, encoding="utf-8")
    return root


def _child(root: Path, home: Path, cache: str = "on") -> dict[str, object]:
    env = {"PERSONAE_HOME": str(home), "PERSONAE_COUNT_CACHE": cache}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    out: dict[str, object] = json.loads(done.stdout)
    return out


def _rows(home: Path) -> int:
    with sqlite3.connect(home / "cache" / "token-counts.sqlite") as conn:
        n: int = conn.execute("SELECT count(*) FROM counts").fetchone()[0]
    return n


@pytest.mark.process
def test_a_fresh_process_reads_the_counts_an_earlier_one_made(tmp_path: Path) -> None:
    root, home = _project(tmp_path), tmp_path / "home"
    first = _child(root, home)
    assert _rows(home) > 0
    second = _child(root, home)
    assert second["digest"] == first["digest"] and second["total"] == first["total"]
    # The messages' counts came from the disk: only the cut and the prompt's new parts
    # were encoded again.
    assert isinstance(first["long"], int) and isinstance(second["long"], int)
    assert second["long"] < first["long"] / 4, (first, second)
    # A cache file that is not a database is made again; the prompt is the same.
    (home / "cache" / "token-counts.sqlite").write_bytes(b"not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (home / "cache" / f"token-counts.sqlite{suffix}").unlink(missing_ok=True)
    again = _child(root, home)
    assert again["digest"] == first["digest"] and again["long"] == first["long"]
    assert _rows(home) > 0
    # Turned off: no file, same prompt.
    off = _child(root, tmp_path / "other-home", cache="off")
    assert off["digest"] == first["digest"]
    assert not (tmp_path / "other-home" / "cache").exists()


def test_counts_round_trip_and_stay_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERSONAE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PERSONAE_COUNT_CACHE", "on")
    monkeypatch.setattr(_diskcounts, "MAX_ROWS", 1000)
    keys = [i.to_bytes(16, "big") for i in range(5000)]
    for i, key in enumerate(keys):
        _diskcounts.record("o200k_base", key, i)
    _diskcounts.flush()
    assert _rows(tmp_path / "home") <= 1000 + _diskcounts._BATCH
    got = _diskcounts.lookup("o200k_base", keys)
    assert got and all(got[k] == keys.index(k) for k in got)
    assert keys[-1] in got  # the newest are kept
    assert _diskcounts.lookup("cl100k_base", keys[-5:]) == {}  # by counter
    # A value that is not a count is never returned.
    with sqlite3.connect(tmp_path / "home" / "cache" / "token-counts.sqlite") as conn:
        conn.execute("UPDATE counts SET n = 'x' WHERE key = ?", (keys[-1],))
        conn.execute("UPDATE counts SET n = -3 WHERE key = ?", (keys[-2],))
    assert _diskcounts.lookup("o200k_base", keys[-3:]) == {keys[-3]: 4997}


@pytest.mark.process
def test_processes_writing_at_once_do_not_fail(tmp_path: Path) -> None:
    root, home = _project(tmp_path), tmp_path / "home"
    env = {**os.environ, "PERSONAE_HOME": str(home), "PERSONAE_COUNT_CACHE": "on"}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(root)], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outs = [json.loads(c.communicate(timeout=120)[0]) for c in children]
    assert all(c.returncode == 0 for c in children)
    assert len({o["digest"] for o in outs}) == 1
    assert _rows(home) > 0
