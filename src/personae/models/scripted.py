"""The scripted replay server: a real HTTP server on 127.0.0.1 replaying one scenario file.

It answers, from one :class:`~personae.models.scenario.Scenario`, plain JSON
or streamed SSE over three wire protocols: OpenAI chat completions
(``POST /v1/chat/completions``), OpenAI Responses (``POST /v1/responses``,
what Codex speaks) and Anthropic Messages (``POST /v1/messages`` with
``tool_use`` blocks, plus ``/v1/messages/count_tokens``; what Claude Code and
the ``anthropic:`` provider speak). Runs go through real provider code and
real loopback HTTP. It is a *scripted* server for tests and the demo, never a
real language model; its model name is always ``scripted`` or
``scripted:<label>``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from personae.models import _anthropic, _imitate, _responses, _served
from personae.models._http import shared_tls_client
from personae.models._pieces import text_pieces
from personae.models.player import ScenarioPlayer, request_text
from personae.models.scenario import Answer, Scenario, load_scenario

__all__ = ["ScriptedServer", "request_text"]


def _output_tool(body: dict[str, Any]) -> str | None:
    for tool in body.get("tools") or []:
        name = str(tool.get("function", {}).get("name", ""))
        if name.startswith("final_result"):
            return name
    return None


class _Server(ThreadingHTTPServer):
    """The HTTP server: a client that hangs up mid-answer (a call's timeout, the run's
    deadline, a cancelled run) is a normal end of that request, not an error to print."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class ScriptedServer:
    """An OpenAI-compatible chat-completions server answering from a scenario.

    Use as a context manager (or ``start()``/``stop()``). ``requests`` keeps
    every request body received, ``served`` the answers given (for tests).
    """

    def __init__(
        self, scenario: Scenario | Path | str, *, label: str = "scripted", port: int = 0
    ) -> None:
        self.scenario = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        self.label = label
        self.player = ScenarioPlayer(self.scenario)
        """Picks answers; keeps every request and answer."""
        self.raw_requests: list[tuple[str, dict[str, Any]]] = []
        """Every POST received as sent: (route, body) in its own protocol."""
        self.port = port
        """Port to bind on 127.0.0.1 (0: any free port)."""
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> ScriptedServer:
        """Bind an ephemeral port on 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        handler = type("Handler", (_Handler,), {"scripted": self})
        self._httpd = _Server(("127.0.0.1", self.port), handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="personae-scripted-replay", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Shut the server down."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        if self._httpd is None:
            raise RuntimeError("scripted server is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def model_name(self) -> str:
        """The name runs report for this model (always says scripted)."""
        return self.label if self.label.startswith("scripted") else f"scripted:{self.label}"

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:<port>`` (Anthropic clients add ``/v1`` themselves)."""
        return self.base_url.removesuffix("/v1")

    def anthropic_model(self) -> Any:
        """A pydantic-ai ``AnthropicModel`` talking Messages to this server over loopback HTTP."""
        # local import: a provider's SDK (openai, anthropic) loads only when that protocol is used
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        provider = AnthropicProvider(
            base_url=self.root_url, api_key="scripted-no-key", http_client=shared_tls_client()
        )
        return AnthropicModel(self.model_name, provider=provider)

    def model(self) -> Any:
        """A pydantic-ai ``OpenAIChatModel`` talking to this server over loopback HTTP."""
        # local import: a provider's SDK (openai, anthropic) loads only when that protocol is used
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(
            base_url=self.base_url, api_key="scripted-no-key", http_client=shared_tls_client()
        )
        return OpenAIChatModel(self.model_name, provider=provider)

    def local_model(self) -> Any:
        """A model talking to this server as to a server the user runs (the way
        ``openai:`` models with a base URL are built, local servers' habits handled)."""
        # local import: a provider's SDK (openai) loads only when that protocol is used
        from personae.models.quirks import local_chat_model

        return local_chat_model(self.model_name, self.base_url, None)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body received."""
        return self.player.requests

    @property
    def served(self) -> list[Answer | None]:
        """The answer given to each request."""
        return self.player.served

    @property
    def remaining_steps(self) -> int:
        """Ordered steps not answered yet."""
        return self.player.remaining_steps

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """HTTP status and JSON payload for a chat-completions request body."""
        refused = _imitate.refusal(self.scenario.server, body)
        if refused is not None:
            return refused
        answer = self.player.pick(body)
        if answer is None:
            return 500, {
                "error": {
                    "message": self.player.no_answer_message(),
                    "type": "scripted_scenario_exhausted",
                }
            }
        if answer.delay:
            time.sleep(answer.delay)
        if answer.error is not None:
            status = int(answer.error.get("status", 500))
            return status, {"error": {"message": str(answer.error.get("message", "scripted"))}}
        message: dict[str, Any] = {"role": "assistant", "content": answer.text}
        finish = "stop"
        calls = [(c.name, c.args) for c in answer.tool_calls]
        if answer.output is not None:
            tool = _output_tool(body)
            if tool is None:
                message["content"] = json.dumps(answer.output)
            else:
                calls = [(tool, answer.output)]
        cap = body.get("max_tokens") or body.get("max_completion_tokens")
        if isinstance(cap, int) and message["content"] and len(message["content"]) > cap * 4:
            message["content"] = message["content"][: cap * 4]  # 4 characters a token
            finish = "length"
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for name, args in calls
            ]
            finish = "tool_calls"
        prompt = _served.prompt_tokens(body)
        extra = {"_stream_pause": answer.stream_pause} if answer.stream_pause else {}
        completion = _served.completion_tokens(message)
        return 200, {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            # counted from what was received, as a real server counts (models/_served.py)
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        } | extra


def _stream_chunks(payload: dict[str, Any], *, usage: bool = True) -> list[dict[str, Any]]:
    """The chunks of a streamed answer equivalent to ``payload``: text arrives word by
    word, tool calls whole; the last chunk has the usage unless
    the imitated server sends none."""
    choice = payload["choices"][0]
    message = choice["message"]
    base = {k: payload[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    deltas: list[dict[str, Any]] = [{"role": "assistant"}]
    if message.get("content"):  # word by word, so clients see real text deltas
        pieces = text_pieces(message["content"])
        deltas = [{"role": "assistant", "content": pieces[0]}]
        deltas += [{"content": piece} for piece in pieces[1:]]
    if message.get("tool_calls"):
        deltas[-1]["tool_calls"] = [
            {"index": i, **call} for i, call in enumerate(message["tool_calls"])
        ]
    return [
        *({**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas),
        {
            **base,
            "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
        }
        | ({"usage": payload["usage"]} if usage else {}),
    ]


class _Handler(BaseHTTPRequestHandler):
    """HTTP handler of a :class:`ScriptedServer` (the server is set per subclass)."""

    scripted: ScriptedServer
    """The server whose scenario answers."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:  # the model list (what `personae doctor` asks for), /props
        imitated = self.scripted.scenario.server
        props = _imitate.props(imitated)
        if self.path.rstrip("/").endswith("/models"):
            listed = _imitate.listed_model(imitated, self.scripted.model_name)
            self._send_json(200, {"object": "list", "data": [listed]})
        elif self.path.rstrip("/") == "/props" and props is not None:
            self._send_json(200, props)
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "body is not JSON"}})
            return
        if not isinstance(body, dict):
            self._send_json(400, {"error": {"message": "body is not a JSON object"}})
            return
        route = self.path.split("?", 1)[0].rstrip("/")
        self.scripted.raw_requests.append((route, body))
        if route.endswith("/chat/completions"):
            status, payload = self.scripted.answer(body)
            pause = float(payload.pop("_stream_pause", 0.0))
            if status == 200 and body.get("stream"):
                self._send_stream(payload, pause)
            else:
                self._send_json(status, payload)
        elif route.endswith("/messages/count_tokens"):
            self._send_json(200, _anthropic.count_tokens_reply(body))
        elif route.endswith("/messages"):
            self._messages(body)
        elif route.endswith("/responses"):
            self._responses(body)
        elif route == "/api/show" and _imitate.show(self.scripted.scenario.server) is not None:
            self._send_json(200, _imitate.show(self.scripted.scenario.server) or {})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def _messages(self, body: dict[str, Any]) -> None:
        status, payload = self.scripted.answer(_anthropic.to_chat(body))
        if status != 200:
            message = str(payload["error"]["message"])
            self._send_json(status, _anthropic.error_payload(message, status=status))
            return
        response = _anthropic.from_chat(payload, str(body.get("model") or "scripted"))
        if body.get("stream"):
            self._send_events(_anthropic.sse_events(response))
        else:
            self._send_json(200, response)

    def _responses(self, body: dict[str, Any]) -> None:
        chat = _responses.to_chat(body)
        status, payload = self.scripted.answer(chat)
        if status != 200:
            self._send_json(status, payload)
            return
        response = _responses.from_chat(payload, chat, self.scripted.model_name)
        if body.get("stream"):
            self._send_events(_responses.sse_events(response))
        else:
            self._send_json(200, response)

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, payload: dict[str, Any], pause: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        usage = _imitate.streams_usage(self.scripted.scenario.server)
        for n, chunk in enumerate(_stream_chunks(payload, usage=usage)):
            if n and pause:
                time.sleep(pause)
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _send_events(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for event, data in events:
            self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
