"""A tiny stdio MCP server for the process-lifetime tests (``python _mcp_probe_server.py TOKEN``).

It starts a helper (``sleep 300.TOKEN``) in its own process group, as servers
started through ``npx`` or a shell wrapper do, then serves one tool, ``ping``.
When its stdin closes the server exits but the helper would stay: only a group
kill by the run removes it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer


def main() -> None:
    """Start the helper, then serve ``ping`` over stdio."""
    token = sys.argv[1]
    subprocess.Popen(["sleep", f"300.{token}"], stdin=subprocess.DEVNULL)
    Path("probe.started").write_text("started\n")  # in the project root (the server's cwd)
    server: MCPServer = MCPServer("probe", log_level="WARNING")

    def ping() -> str:
        return "pong"

    server.add_tool(ping, name="ping", description="Answers pong.")
    server.run("stdio")


if __name__ == "__main__":
    main()
