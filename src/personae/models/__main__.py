"""``python -m personae.models SCENARIO [--port N]``: serve a scenario file by hand.

Runs the scripted loopback server (OpenAI chat and Responses under ``/v1``,
Anthropic Messages at ``/v1/messages``) until Ctrl-C, so a real host can be
pointed at it (see docs/real-hosts.md). It replays the file; it is not a model.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from personae.errors import PersonaeError
from personae.models.scripted import ScriptedServer


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve_scenario(argv: list[str] | None = None) -> int:
    """Serve until interrupted; print one line per request served."""
    parser = argparse.ArgumentParser(prog="python -m personae.models")
    parser.add_argument("scenario", help="scenario YAML file")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any)")
    args = parser.parse_args(argv)
    try:
        server = ScriptedServer(args.scenario, port=args.port).start()
    except (PersonaeError, OSError) as exc:
        print(f"personae: error: {exc}", file=sys.stderr)
        return 1
    print(f"scripted server: {server.base_url} (Anthropic: {server.root_url})", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    for answer in server.served:
        calls = [c.name for c in answer.tool_calls] if answer is not None else []
        print("no answer" if answer is None else f"answered: {answer.text or ''} {calls or ''}")
    print(f"{len(server.served)} requests answered, {server.remaining_steps} steps left")
    return 0


if __name__ == "__main__":
    sys.exit(serve_scenario())
