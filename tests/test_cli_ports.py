"""``personae ui`` and ``personae serve --http`` have distinct default ports; a busy default
gives way to the next free port, and the command says which it took."""

from __future__ import annotations

import socket

import pytest

from _helpers import personae_cli
from personae.cli._ports import MIND_HTTP_PORT, VIEWER_PORT, pick_port, port_taken


def test_the_two_servers_have_distinct_defaults() -> None:
    assert VIEWER_PORT != MIND_HTTP_PORT


def test_a_busy_default_gives_way_and_says_which_port_it_took(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        default = busy.getsockname()[1]
        assert port_taken("127.0.0.1", default) is not None
        chosen = pick_port("127.0.0.1", None, default=default, command="personae ui")
        assert chosen != default and port_taken("127.0.0.1", chosen) is None
        err = capsys.readouterr().err
        assert err == (
            f"personae: port {default} is busy; personae ui took port {chosen} "
            "(--port N picks one)\n"
        )
        # A port the user gave is used as given (the server then refuses a busy one).
        assert pick_port("127.0.0.1", default, default=VIEWER_PORT, command="x") == default


def test_a_free_default_is_taken_silently(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert pick_port("127.0.0.1", None, default=free, command="personae ui") == free
    assert capsys.readouterr().err == ""


def test_busy_explicit_port_for_serve_is_one_line() -> None:

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = personae_cli("serve", "--http", "--port", str(port))
    assert done.returncode == 1
    assert done.stderr.startswith(f"personae: error: --port: cannot listen on 127.0.0.1:{port}")
    assert len(done.stderr.strip().splitlines()) == 1
