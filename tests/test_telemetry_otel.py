"""Runs as OpenTelemetry traces: the SDK's in-memory exporter on a real (scripted) demo run,
OTLP/HTTP to a real loopback receiver, and nothing of OpenTelemetry loaded when it is off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import pytest

from _ui_support import DEMO_TASK, cli
from personae.context.report import BudgetReport, SubagentBrief, read_stored_budget
from personae.store.db import Store
from personae.store.runs import RunStore

SCENARIO = str(resources.files("personae.examples") / "demo" / "scenario.yaml")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("otel") / "weather-service"
    out = cli("demo", "--keep", str(root), cwd=root.parent)
    return root, next(w for w in out.split() if w.startswith("run-"))


def _spans(root: Path, run_id: str) -> list[Any]:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from personae.telemetry.otel import export_run

    exporter = InMemorySpanExporter()
    count = export_run(root / ".personae" / "state.db", run_id, exporter=exporter)
    spans = list(exporter.get_finished_spans())
    assert count == len(spans)
    return spans


def test_a_demo_run_becomes_one_trace_with_genai_attributes(demo: tuple[Path, str]) -> None:
    root, run_id = demo
    spans = _spans(root, run_id)
    with Store(root / ".personae" / "state.db") as store:
        runs = RunStore(store)
        record, calls = runs.get(run_id), runs.model_calls(run_id)
    assert len({s.context.trace_id for s in spans}) == 1
    by_id = {s.context.span_id: s for s in spans}
    roots = [s for s in spans if s.parent is None]
    assert [r.name for r in roots] == ["invoke_agent maintainer"]
    top = roots[0]
    assert top.attributes["personae.run.id"] == run_id
    assert top.attributes["gen_ai.usage.input_tokens"] == record.usage["input_tokens"]
    for span in spans:  # every span hangs off the trace's root and lies within it
        assert span.parent is None or span.parent.span_id in by_id
        assert top.start_time <= span.start_time <= span.end_time <= top.end_time

    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == len(calls)
    for span, call in zip(
        sorted(chats, key=lambda s: s.attributes["personae.model_call.seq"]), calls, strict=True
    ):
        assert span.attributes["gen_ai.request.model"] == SCENARIO
        assert span.attributes["gen_ai.provider.name"] == "scripted"
        assert span.attributes["gen_ai.usage.input_tokens"] == call.usage["input_tokens"]
        assert span.attributes["gen_ai.usage.output_tokens"] == call.usage["output_tokens"]
        assert span.attributes["personae.role"] == call.role
        # Of the answer only its finish reason and size; never its text.
        assert call.answer is not None and call.answer.finish_reason in ("stop", "tool_call")
        assert span.attributes["gen_ai.response.finish_reasons"] == (call.answer.finish_reason,)
        assert span.attributes["personae.answer.chars"] == call.answer.chars > 0
        assert span.attributes["personae.answer.tool_calls"] == len(call.answer.tool_calls)
        shown = [str(v) for v in span.attributes.values()]
        assert call.answer.text == "" or not any(call.answer.text in v for v in shown)
        report = read_stored_budget(call.budget)  # the model, never the stored dict
        if call.role == "subagent":  # a sub-agent's call records its brief, no sections
            assert isinstance(report, SubagentBrief)
            assert "personae.budget.total" not in span.attributes
        else:
            assert isinstance(report, BudgetReport)
            assert span.attributes["personae.budget.total"] == report.total
            assert "personae.section.task.kept" in span.attributes

    subtasks = {s.name: s for s in spans if s.name.startswith("subtask ")}
    assert set(subtasks) == {"subtask 1", "subtask 2"}
    first = subtasks["subtask 1"]
    assert [e.name for e in first.events].count("personae.validation") == 2
    rejected = next(e for e in first.events if e.name == "personae.validation")
    assert rejected.attributes["personae.completion_signal.blocker_type"] == "hallucination"
    validators = [s for s in chats if s.attributes["personae.role"] == "validator"]
    assert all(s.attributes["personae.completion_signal.confidence"] == "high" for s in validators)

    agent = next(s for s in spans if s.name == "invoke_agent scout")
    assert by_id[agent.parent.span_id] is subtasks["subtask 2"]
    inside = [
        s for s in spans if s.parent is not None and s.parent.span_id == agent.context.span_id
    ]
    assert sorted(s.name.split()[0] for s in inside) == ["chat", "chat", "execute_tool"]
    tool = next(s for s in inside if s.name.startswith("execute_tool"))
    assert tool.attributes["gen_ai.tool.name"] == "read_file"
    assert {s.name for s in spans if s.name.startswith("execute_tool")} == {
        "execute_tool grep",
        "execute_tool read_file",
        "execute_tool agent",
    }


class _Receiver(BaseHTTPRequestHandler):
    bodies: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        type(self).bodies.append((self.path, self.rfile.read(length)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    _Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Receiver.bodies
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.process
def test_personae_run_exports_over_otlp_http_when_the_endpoint_is_set(
    demo: tuple[Path, str], receiver: tuple[str, list[tuple[str, bytes]]]
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    root, _ = demo
    endpoint, bodies = receiver
    out = cli(
        "run", "--persona", "maintainer", "--model", f"scripted:{SCENARIO}", "--json", DEMO_TASK,
        cwd=root, env={"PERSONAE_OTEL_ENDPOINT": endpoint},
    )  # fmt: skip
    run_id = json.loads(out.splitlines()[0])["run_id"]
    assert bodies and all(path == "/v1/traces" for path, _ in bodies)
    names: list[str] = []
    attrs: dict[str, Any] = {}
    for _, body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    names.append(span.name)
                    if span.name == "invoke_agent maintainer":
                        attrs = {a.key: a.value.string_value for a in span.attributes}
    assert attrs["personae.run.id"] == run_id
    assert "invoke_agent scout" in names and "subtask 2" in names
    assert sum(n.startswith("chat ") for n in names) == 11


@pytest.mark.process
def test_no_opentelemetry_sdk_is_loaded_when_telemetry_is_off(demo: tuple[Path, str]) -> None:
    root, _ = demo
    code = (
        "import sys\n"
        "from personae.cli.app import run_cli\n"
        f"rc = run_cli(['run', '--persona', 'maintainer', '--model', 'scripted:{SCENARIO}', "
        f"'--json', {DEMO_TASK!r}])\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(("
        "'opentelemetry.sdk', 'opentelemetry.exporter', 'personae.telemetry')))\n"
        "print('LOADED', rc, loaded)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PERSONAE_OTEL_ENDPOINT"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
        env=env, check=False,
    )  # fmt: skip
    last = proc.stdout.strip().splitlines()[-1]
    assert last == "LOADED 0 []", proc.stdout + proc.stderr


@pytest.mark.process
def test_an_unreachable_endpoint_is_one_warning_and_the_run_still_succeeds(
    tmp_path: Path,
) -> None:
    """Also: the endpoint may come from the project config (``otel_endpoint``)."""
    import shutil
    import socket

    root = tmp_path / "weather-service"
    shutil.copytree(Path(SCENARIO).parent / "project", root)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = root / ".personae" / "config.yaml"
    config.write_text(f"otel_endpoint: http://127.0.0.1:{port}\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "personae", "run", "--persona", "maintainer", "--model",
         f"scripted:{SCENARIO}", "--json", DEMO_TASK],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
        env={k: v for k, v in os.environ.items() if k != "PERSONAE_OTEL_ENDPOINT"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout.splitlines()[0])["run_id"]
    assert proc.stderr.strip() == (
        f"personae: warning: trace of run {run_id} not exported to http://127.0.0.1:{port}"
    )
