"""The mind MCP server through real clients: in-memory, stdio subprocess, HTTP, Inspector."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import tomllib
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

import personae
from _helpers import mind_http_server
from personae.hosts.adapters import MIND_TOOLS
from personae.mind import ERROR_PREFIX, REQUIRED_KEYS
from personae.mind._tooldocs import MAX_DOC_CHARS
from personae.mind.server import MindPaths, create_server, default_paths

MEMORY = "---\nname: Brandon\ndescription: sponsor of the portal\ntype: user\n---\nLikes tea.\n"
EXPECTED_TOOLS = {
    "bootstrap_session",
    "get_system_prompt",
    "refresh_persona",
    "context",
    "list_memory_files",
    "read_memory_file",
    "write_memory_file",
    "observe",
    "reflect",
    "recall",
}


@pytest.fixture
def paths(tmp_path: Path) -> MindPaths:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "user_brandon.md").write_text(MEMORY, encoding="utf-8")
    (tmp_path / "prompt").mkdir()
    (tmp_path / "prompt" / "mind.md").write_text(
        "You are Sati.\n@include voice.md\n", encoding="utf-8"
    )
    (tmp_path / "prompt" / "voice.md").write_text("Speak plainly.\n", encoding="utf-8")
    return MindPaths(
        memory_dir=tmp_path / "memory",
        prompt=tmp_path / "prompt" / "mind.md",
        store=tmp_path / "state.db",
    )


def _in_memory(paths: MindPaths, body: Callable[[Client], Awaitable[None]]) -> None:
    server, _ = create_server(paths)

    async def main() -> None:
        async with Client(server) as client:
            await body(client)

    anyio.run(main)


def _structured(result: Any) -> dict[str, Any]:
    assert result.is_error is False, result.content
    assert isinstance(result.structured_content, dict)
    # The text content carries the same JSON as the structured content.
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def test_instructions_and_descriptions_fit_host_limits(paths: MindPaths) -> None:
    async def body(client: Client) -> None:
        assert client.instructions is not None
        assert 200 < len(client.instructions) < MAX_DOC_CHARS
        tools = (await client.list_tools()).tools
        assert {t.name for t in tools} == EXPECTED_TOOLS
        for tool in tools:
            assert tool.description and len(tool.description) < MAX_DOC_CHARS, tool.name
        boot = next(t for t in tools if t.name == "bootstrap_session")
        assert set(REQUIRED_KEYS) <= set(boot.output_schema["properties"])  # typed, not -> str
        reflect = next(t for t in tools if t.name == "reflect")
        kind = json.dumps(reflect.input_schema["properties"]["kind"])
        for k in ("user_said", "time_passed", "ambient", "internal"):
            assert k in kind

    _in_memory(paths, body)


def test_every_tool_in_memory(paths: MindPaths) -> None:
    async def body(client: Client) -> None:
        packet = _structured(await client.call_tool("bootstrap_session", {"session_id": "s-1"}))
        listed = {t.name for t in (await client.list_tools()).tools}
        assert set(packet["available_mind_tools"]) == listed
        assert set(MIND_TOOLS) == listed  # what host gates never block
        assert packet["mind_contract"] == "You are Sati.\nSpeak plainly.\n"
        assert packet["memory_catalog"]["category_counts"] == {"user": 1}

        prompt = await client.call_tool("get_system_prompt", {})
        assert prompt.content[0].text == packet["mind_contract"]

        context = _structured(await client.call_tool("context", {}))
        assert context["last_bootstrap_at"] is not None

        listing = _structured(await client.call_tool("list_memory_files", {}))
        assert [f["name"] for f in listing["files"]] == ["user_brandon.md"]

        read = _structured(await client.call_tool("read_memory_file", {"name": "user_brandon.md"}))
        assert read["content"] == MEMORY and read["type"] == "user"

        content = "---\nname: Portal\ndescription: the portal project\ntype: project\n---\nShip it."
        wrote = _structured(
            await client.call_tool("write_memory_file", {"name": "portal.md", "content": content})
        )
        assert wrote["index_updated"] is True

        seen = _structured(
            await client.call_tool(
                "observe", {"tool_name": "Bash", "args": {"command": "ls portal"}}
            )
        )
        assert seen["kind"] == "tool_call" and seen["id"] >= 1
        done = _structured(
            await client.call_tool(
                "observe", {"tool_name": "Bash", "args": "ls portal", "result": {"stdout": "a b"}}
            )
        )
        assert done["kind"] == "tool_result"

        said = _structured(
            await client.call_tool(
                "reflect",
                {"observation": "User wants weekly portal summaries", "kind": "user_said"},
            )
        )
        assert said["kind"] == "user_said"

        found = _structured(await client.call_tool("recall", {"query": "weekly summaries", "k": 3}))
        assert found["results"][0]["source"] == "journal"
        faceted = _structured(
            await client.call_tool("recall", {"query": "portal", "facet": "type:project"})
        )
        assert [r["name"] for r in faceted["results"]] == ["portal.md"]

    _in_memory(paths, body)


def test_tool_errors_are_one_line_messages(paths: MindPaths) -> None:
    async def body(client: Client) -> None:
        bad = await client.call_tool("read_memory_file", {"name": "../../etc/passwd"})
        assert bad.is_error and "invalid memory file name" in bad.content[0].text
        bad = await client.call_tool("reflect", {"observation": "x", "kind": "gossip"})
        assert bad.is_error
        bad = await client.call_tool("write_memory_file", {"name": "a.md", "content": "no header"})
        assert bad.is_error and "frontmatter" in bad.content[0].text
        bad = await client.call_tool("bootstrap_session", {"session_id": "bad id with spaces"})
        assert bad.is_error and "session_id" in bad.content[0].text

    _in_memory(paths, body)


def test_broken_prompt_degrades_with_the_same_text(paths: MindPaths) -> None:
    assert paths.prompt is not None
    paths.prompt.write_text("@include missing.md\n", encoding="utf-8")

    async def body(client: Client) -> None:
        packet = _structured(await client.call_tool("bootstrap_session", {}))
        assert packet["mind_contract_available"] is False
        assert packet["mind_contract"].startswith(ERROR_PREFIX)
        prompt = await client.call_tool("get_system_prompt", {})
        assert prompt.content[0].text == packet["mind_contract"]

    _in_memory(paths, body)


def _serve_args(paths: MindPaths) -> list[str]:
    return [
        "-m",
        "personae",
        "serve",
        "--memory-dir",
        str(paths.memory_dir),
        "--prompt",
        str(paths.prompt),
        "--store",
        str(paths.store),
    ]


@pytest.mark.process
def test_stdio_client_session_against_a_real_subprocess(paths: MindPaths, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=_serve_args(paths), cwd=str(tmp_path), env=dict(os.environ)
    )

    hello: dict[str, Any] = {}

    async def main() -> dict[str, Any]:
        with anyio.fail_after(90), open(tmp_path / "stderr.log", "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                init = await session.initialize()
                hello.update(name=init.server_info.name, version=init.server_info.version)
                result = await session.call_tool("bootstrap_session", {"session_id": "stdio-1"})
                return _structured(result)

    packet = anyio.run(main)
    # serverInfo names the server and its version (hosts show it; an empty one looks broken)
    assert hello == {"name": "personae", "version": personae.__version__}
    assert personae.__version__ == _pyproject_version()
    assert packet["schema_version"] == 1 and packet["mind_contract_available"] is True
    assert packet["session_id"] == "stdio-1"
    assert len(json.dumps(packet, indent=2)) <= 40_000


_DISCOVER = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "copilot-cli", "version": "1.0.102"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "copilot-cli", "version": "1.0.102"},
    },
}


def _stdio_exchange(paths: MindPaths, cwd: Path, messages: list[dict[str, Any]]) -> list[Any]:
    """Write ``messages`` at once to a real ``personae serve`` and return every answer it
    writes (90 s bound): those up to the answer to the last request, then, once its standard
    input is closed, whatever else it writes before it exits (an answer to an earlier request
    that it should have dropped still shows)."""
    last = [m["id"] for m in messages if "id" in m][-1]
    with subprocess.Popen(
        [sys.executable, *_serve_args(paths)],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        proc.stdin.flush()
        answers: list[Any] = []
        timer = threading.Timer(90, proc.kill)
        timer.start()
        try:
            while line := proc.stdout.readline():
                answers.append(json.loads(line))
                if answers[-1].get("id") == last:
                    break
            proc.stdin.close()
            answers.extend(json.loads(line) for line in proc.stdout if line.strip())
        finally:
            timer.cancel()
            proc.wait(timeout=30)
    return answers


@pytest.mark.process
def test_a_client_that_fell_back_to_initialize_is_served(paths: MindPaths, tmp_path: Path) -> None:
    """Copilot CLI opens with the 2026-07-28 ``server/discover`` and, when no answer comes
    within about 10 s (a server starting on a loaded machine), sends ``initialize`` on the
    same pipe. The server reads both at once: it serves the handshake the client now waits
    for (the SDK alone let the abandoned opening pick the era, refused the ``initialize``
    with -32022, and the host dropped the server: no bootstrap tool for the whole session)."""
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    tools = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    answers = _stdio_exchange(paths, tmp_path, [_DISCOVER, _INITIALIZE, initialized, tools])
    assert [a.get("id") for a in answers] == [1, 2], answers
    assert "error" not in answers[0], answers[0]
    assert answers[0]["result"]["serverInfo"]["name"] == "personae"
    names = {t["name"] for t in answers[1]["result"]["tools"]}
    assert names == EXPECTED_TOOLS


@pytest.mark.process
def test_a_2026_client_is_still_served_in_its_era(paths: MindPaths, tmp_path: Path) -> None:
    """Without a fallback behind it, ``server/discover`` is answered (the 2026-07-28 era)."""
    answers = _stdio_exchange(paths, tmp_path, [_DISCOVER])
    assert [a.get("id") for a in answers] == [0], answers
    result = answers[0]["result"]
    assert result["supportedVersions"] == ["2026-07-28"], result
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "personae", result


def _pyproject_version() -> str:
    text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    return str(tomllib.loads(text)["project"]["version"])


@contextmanager
def _http_server(paths: MindPaths, tmp_path: Path) -> Iterator[str]:
    """A real ``personae serve --http`` process; yields its MCP URL."""
    with mind_http_server(*_serve_args(paths)[3:], cwd=tmp_path) as url:
        yield url


@pytest.mark.process
def test_streamable_http_on_loopback(paths: MindPaths, tmp_path: Path) -> None:
    with _http_server(paths, tmp_path) as url:

        async def main() -> dict[str, Any]:
            with anyio.fail_after(60):
                async with Client(url) as client:
                    return _structured(await client.call_tool("bootstrap_session", {}))

        packet = anyio.run(main)
        assert packet["mind_contract_available"] is True


@pytest.mark.process
def test_oversized_input_is_a_tool_error_over_http(paths: MindPaths, tmp_path: Path) -> None:
    # The SDK's 4 MiB default body limit answered a 5 MB observe with HTTP 413 (a protocol
    # error); the tool must see it and answer with a tool error naming its limit.
    big = "x" * 5_000_000
    got: dict[str, Any] = {}
    calls = {
        "observe": ("observe", {"tool_name": "Bash", "args": big}),
        "result": ("observe", {"tool_name": "Bash", "args": "ls", "result": big}),
        "reflect": ("reflect", {"observation": big, "kind": "internal"}),
        "write": ("write_memory_file", {"name": "big.md", "content": MEMORY + big}),
        "after": ("observe", {"tool_name": "Bash", "args": "ls"}),
    }
    with _http_server(paths, tmp_path) as url:

        async def main() -> None:
            with anyio.fail_after(120):
                async with Client(url) as client:
                    for key, (tool, args) in calls.items():
                        got[key] = await client.call_tool(tool, args)

        anyio.run(main)
    for name in ("observe", "result", "reflect"):
        assert got[name].is_error, name
        assert "larger than 200000 characters" in got[name].content[0].text
    assert got["write"].is_error and "larger than" in got["write"].content[0].text
    assert got["after"].is_error is False  # the session is fine afterwards
    assert not (paths.memory_dir / "big.md").exists()


@pytest.mark.process
def test_http_refuses_non_loopback(paths: MindPaths, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, *_serve_args(paths), "--http", "--host", "0.0.0.0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "not a loopback address" in proc.stderr and "Traceback" not in proc.stderr


INSPECTOR_VERSION = "2.12.0"


def _inspector_bin() -> Path:
    """The MCP Inspector CLI installed by scripts/setup.d/10-mcp-inspector.sh (no download here)."""
    cache = Path(os.environ.get("PERSONAE_CI_CACHE") or Path.home() / ".cache" / "personae-ci")
    found = cache / "mcp-inspector" / "node_modules" / ".bin" / "mcp-inspector"
    if not found.is_file():
        pytest.fail(
            f"MCP Inspector {INSPECTOR_VERSION} is not installed at {found}: run "
            "`source scripts/setup.d/00-apt.sh; source scripts/setup.d/10-mcp-inspector.sh` "
            "(or bash scripts/test.sh, which does it; set PERSONAE_CI_CACHE to use another folder)"
        )
    return found


def _inspector(args: list[str], paths: MindPaths, tmp_path: Path) -> str:
    cmd = [
        str(_inspector_bin()),
        "--cli",
        # The server starts a Python interpreter: on a busy machine that takes longer than
        # the Inspector's default 15 s to answer the opening message.
        "--connect-timeout",
        "90000",
        "-e",
        f"PYTHONPATH={os.environ['PYTHONPATH']}",
        "--cwd",
        str(tmp_path),
        sys.executable,
        *_serve_args(paths),
        *args,
    ]
    # Keep the Inspector away from the real home directory (it keeps a catalog there).
    env = dict(
        os.environ, HOME=str(tmp_path / "home"), MCP_CATALOG_PATH=str(tmp_path / "catalog.json")
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_mcp_inspector_cli(paths: MindPaths, tmp_path: Path) -> None:
    listed = json.loads(_inspector(["--method", "tools/list"], paths, tmp_path))
    assert {t["name"] for t in listed["tools"]} == EXPECTED_TOOLS
    called = json.loads(
        _inspector(
            [
                "--method",
                "tools/call",
                "--tool-name",
                "bootstrap_session",
                "--tool-arg",
                "session_id=inspector-1",
            ],
            paths,
            tmp_path,
        )
    )
    packet = called.get("structuredContent") or json.loads(called["content"][0]["text"])
    assert packet["session_id"] == "inspector-1"
    assert packet["mind_contract_available"] is True


def test_default_paths_take_each_given_path_and_default_the_rest(tmp_path: Path) -> None:
    state = tmp_path / ".personae"
    assert default_paths(tmp_path) == MindPaths(
        memory_dir=state / "memory", prompt=state / "mind.md", store=state / "state.db"
    )
    other = tmp_path / "elsewhere.db"
    given = default_paths(tmp_path, store=other)
    assert given == MindPaths(memory_dir=state / "memory", prompt=state / "mind.md", store=other)
    mem, prompt = tmp_path / "m", tmp_path / "p.md"
    assert default_paths(tmp_path, memory_dir=mem, prompt=prompt).memory_dir == mem
    assert default_paths(tmp_path, memory_dir=mem, prompt=prompt).prompt == prompt
