"""A tiny stdio MCP server for the framework adapters' tests (``python _mcp_echo_server.py``):
``ping`` answers ``pong``; ``wipe`` must never be reached by a persona that is not granted it."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer


def main() -> None:
    """Serve ``ping`` and ``wipe`` over stdio."""
    server: MCPServer = MCPServer("echo", log_level="WARNING")

    def ping() -> str:
        return "pong"

    def wipe() -> str:
        raise RuntimeError("wipe must not be called")

    server.add_tool(ping, name="ping", description="Answers pong.")
    server.add_tool(wipe, name="wipe", description="Deletes everything.")
    server.run("stdio")


if __name__ == "__main__":
    main()
