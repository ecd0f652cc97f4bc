"""A real PostgreSQL server for the store tests (a pytest plugin, see ``conftest.py``).

One throwaway cluster per test session (``initdb`` and ``postgres`` from Debian's
``postgresql`` package, found under ``/usr/lib/postgresql/*/bin``) listening only on a
private unix socket in a temporary folder, never on TCP. As root the server runs as the
``postgres`` user (``runuser``/``setpriv``); it is this process's child and is killed with
it. Each test gets its own database, copied from a migrated
template (``CREATE DATABASE ... TEMPLATE``) so tests stay fast and independent.

The ``backend`` fixture parametrizes a test over ``sqlite`` and ``postgres``; ``open_store``
opens the test's store on that backend (call it again to reopen the same database).
If PostgreSQL cannot start, tests that need it fail with the install command; they are
never skipped.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from personae.store import Store

INSTALL = (
    "apt-get install postgresql && pip install -e '.[postgres]' (scripts/setup.d/60-postgresql.sh)"
)
BACKENDS = ("sqlite", "postgres")
SERVER_USER = "postgres"


def dbname(url: str) -> str:
    """The database name of a URL made by :meth:`PgServer.url`."""
    return url.split("@/", 1)[1].split("?", 1)[0]


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if not found:
        pytest.fail(f"PostgreSQL server binaries not found under /usr/lib/postgresql: {INSTALL}")
    return Path(found[-1]).parent


def _version(path: str) -> int:
    part = Path(path).parts[-3]
    return int(part) if part.isdigit() else 0


TEST_SETTINGS = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
"""Durability off: a test cluster is thrown away afterwards (the bench keeps fsync on)."""


class PgServer:
    """A throwaway PostgreSQL cluster on a private unix socket.

    ``settings``: extra server options (``-c name=value ...``); the tests' default turns
    durability off.
    """

    def __init__(self, settings: str = TEST_SETTINGS) -> None:
        self.settings = settings
        self.bin = _binaries()
        self.root = Path(tempfile.mkdtemp(prefix="personae-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "server.log"
        self.as_root = os.geteuid() == 0
        self._names = itertools.count()
        self._template = ""
        self.running = False
        self.proc: subprocess.Popen[bytes] | None = None

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if self.as_root:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    def start(self) -> None:
        """initdb and start the server."""
        self.sock.mkdir()
        if self.as_root:
            shutil.chown(self.root, SERVER_USER)
            shutil.chown(self.sock, SERVER_USER)
        init = self._run(
            "initdb", "-D", str(self.data), "-U", "personae", "-A", "trust", "-E", "UTF8",
            "--no-locale", "--no-sync",
        )  # fmt: skip
        if init.returncode != 0:
            pytest.fail(f"initdb failed: {init.stderr.strip()[-400:]} ({INSTALL})")
        # The postmaster is our child (no pg_ctl daemon) and gets SIGKILL when this process
        # dies (setpriv --pdeathsig): a killed test run leaves no server behind; its
        # backends exit on their own when the postmaster is gone.
        command = [
            "setpriv", "--pdeathsig", "KILL", "--", str(self.bin / "postgres"),
            "-D", str(self.data), "-k", str(self.sock), "-c", "listen_addresses=",
            "-c", "max_connections=300", *shlex.split(self.settings),
        ]  # fmt: skip
        if self.as_root:
            command[1:1] = ["--reuid", SERVER_USER, "--regid", SERVER_USER, "--init-groups"]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self.running = True
        atexit.register(self.stop)
        deadline = time.monotonic() + 60
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                text = self.log.read_text(errors="replace")[-600:]
                self.stop()
                pytest.fail(f"PostgreSQL did not start: {text} ({INSTALL})")
            time.sleep(0.1)

    def _ready(self) -> bool:
        try:
            import psycopg
        except ImportError:
            self.stop()
            pytest.fail(f"psycopg is not installed: {INSTALL}")
        try:
            psycopg.connect(self.url("postgres"), connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    def url(self, dbname: str) -> str:
        """The URL of database ``dbname`` on this server."""
        return f"postgresql://personae@/{dbname}?host={self.sock}"

    def admin(self, sql: str) -> None:
        """Run ``sql`` on the ``postgres`` database (autocommit)."""
        try:
            import psycopg
        except ImportError:
            pytest.fail(f"psycopg is not installed: {INSTALL}")
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def database(self, *, migrated: bool = True) -> str:
        """A new database (a copy of the migrated template, or empty); returns its URL."""
        if migrated and not self._template:
            self._template = "personae_template"
            self.admin(f"CREATE DATABASE {self._template}")
            Store(":memory:", url=self.url(self._template)).close()
        name = f"t{os.getpid()}_{next(self._names)}"
        template = self._template if migrated else "template0"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {template}")
        return self.url(name)

    def drop(self, url: str) -> None:
        """Drop the database of ``url`` (closing leftover connections)."""
        self.admin(f"DROP DATABASE IF EXISTS {dbname(url)} WITH (FORCE)")

    def stop(self) -> None:
        """Stop the server and remove its files."""
        if self.running and self.proc is not None:
            self.running = False
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: ends client sessions
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server (started on first use)."""
    server = PgServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """URL of a fresh, migrated database for this test."""
    url = pg_server.database()
    yield url
    pg_server.drop(url)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgres``: the store backend this test runs on."""
    return str(request.param)


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """The PostgreSQL URL of this test's database, ``None`` on SQLite."""
    if backend == "sqlite":
        return None
    return str(request.getfixturevalue("pg_database"))


@pytest.fixture
def open_store(tmp_path: Path, store_url: str | None) -> Callable[[], Store]:
    """Opens this test's store on its backend (each call a new :class:`Store`)."""
    path = tmp_path / "state.db"

    def opener() -> Store:
        return Store(path) if store_url is None else Store(path, url=store_url)

    return opener


@pytest.fixture
def store_env(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Points ``PERSONAE_DATABASE_URL`` at this test's database (unset on SQLite)."""
    if store_url is None:
        monkeypatch.delenv("PERSONAE_DATABASE_URL", raising=False)
    else:
        monkeypatch.setenv("PERSONAE_DATABASE_URL", store_url)
    return store_url
