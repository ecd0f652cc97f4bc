"""Secrets never reach state.db or a prompt from a handover file or from memory.

Real files, real SQLite, a real ``personae run`` subprocess against the
scripted replay server on loopback, and a real MCP client session for the mind.
The checks read the database files' raw bytes (``state.db`` and its ``-wal``),
so a secret stored anywhere, in any table or index, is found.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from _helpers import dev_project, read_config_scenario
from personae.security.redact import redact, redact_text, redact_value

OPENAI = "sk-proj-" + "Q7" * 12
ANTHROPIC = "sk-ant-api03-" + "Zx9" * 8
GITHUB = "ghp_" + "a1B2" * 9
AWS = "AKIA" + "QWERTYUIOPASDFGH"
SLACK = "xoxb-1234567890-" + "abcdefghij"
GOOGLE = "AIza" + "Sy" + "B" * 33
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0TH"
BEARER = "Zm9vYmFyYmF6cXV4cXV1eA"
URL_PASSWORD = "hunter2-correct-horse"
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
ENV_VALUE = "env-only-value-9f3c2a71"
"""The value of a secret-named variable; it has no credential shape of its own."""
ENV = {"DEPLOY_SERVICE_TOKEN": ENV_VALUE}

SECRETS = [OPENAI, ANTHROPIC, GITHUB, AWS, SLACK, GOOGLE, JWT, BEARER, URL_PASSWORD, PEM_BODY]
ALL = [*SECRETS, ENV_VALUE]
LEAKY_TEXT = (
    f"openai {OPENAI}; anthropic {ANTHROPIC}; gh {GITHUB}; aws {AWS}; slack {SLACK}; "
    f"google {GOOGLE}; jwt {JWT}; Authorization: Bearer {BEARER}; "
    f"db postgres://app:{URL_PASSWORD}@db.internal/x; deploy token {ENV_VALUE}\n{PEM}"
)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (OPENAI, "openai-key"),
        (ANTHROPIC, "anthropic-key"),
        (GITHUB, "github-token"),
        ("github_pat_" + "x1" * 20, "github-token"),
        (AWS, "aws-access-key"),
        (SLACK, "slack-token"),
        (GOOGLE, "google-api-key"),
        (JWT, "jwt"),
        (f"Authorization: Bearer {BEARER}", "bearer-token"),
        (PEM, "private-key"),
        (f"postgres://app:{URL_PASSWORD}@db/x", "url-password"),
        (f"https://x.test/login?user=bob&password={URL_PASSWORD}", "secret-value"),
        (f"export OPENAI_API_KEY={URL_PASSWORD}", "secret-value"),
        (f'{{"client_secret": "{URL_PASSWORD}"}}', "secret-value"),
    ],
)
def test_each_shape_is_replaced_by_a_marker_naming_it(text: str, kind: str) -> None:
    done = redact(f"before {text} after", environ={})
    assert f"[REDACTED:{kind}]" in done.text
    assert kind in done.kinds
    secret = URL_PASSWORD if URL_PASSWORD in text else BEARER if BEARER in text else text
    secret = PEM_BODY if text == PEM else secret
    assert secret not in done.text
    assert done.text.startswith("before ") and done.text.endswith(" after")


def test_values_of_secret_named_variables_are_redacted_wherever_they_appear() -> None:
    environ = {**ENV, "DB_PASSWORD": "pw-7f1e99aa", "HOME": "/home/someone", "SHORT_TOKEN": "abc"}
    done = redact(f"the token is {ENV_VALUE} and pw-7f1e99aa; home /home/someone", environ=environ)
    assert done.text == (
        "the token is [REDACTED:env:DEPLOY_SERVICE_TOKEN] and [REDACTED:env:DB_PASSWORD]; "
        "home /home/someone"
    )
    assert redact_text("abc", environ=environ) == "abc"  # short values are never hunted


def test_working_directories_are_not_hunted_as_secrets(tmp_path: Path) -> None:
    """``$PWD``/``$OLDPWD`` (exactly those names; ``pwd`` reads as a password elsewhere)."""
    cwd = str(tmp_path / "proj")
    environ = {**ENV, "PWD": cwd, "OLDPWD": str(tmp_path)}
    doc = {"source": {"workingDirectory": cwd}, "notes": f"built in {cwd}"}
    assert redact_value(doc, environ=environ) == doc
    # The secret-named variable next to them is still hunted; `pwd=` in text too.
    done = redact(f"cd {cwd} && deploy {ENV_VALUE}; pwd=hunter2-horse", environ=environ)
    assert done.text == (
        f"cd {cwd} && deploy [REDACTED:env:DEPLOY_SERVICE_TOKEN]; pwd=[REDACTED:secret-value]"
    )
    assert redact_value({"pwd": "hunter2-horse"}, environ={}) == {"pwd": "[REDACTED:secret-field]"}
    # A lower-case `pwd` variable is not the shell's: its value is hunted.
    assert redact_text(f"x {cwd} y", environ={"pwd": cwd}) == "x [REDACTED:env:pwd] y"


def test_a_secret_that_looks_like_a_path_is_still_redacted() -> None:
    """No shape exemption: about 1 in 64 AWS secret keys starts with ``/``."""
    key = "/K7MDENGbPxRfiCYEXAMPLEKEYwJalrXUtnFEMI+abc"
    assert redact_text(f"aws_secret_access_key = {key}", environ={}) == (
        "aws_secret_access_key = [REDACTED:secret-value]"
    )
    assert redact_text(f"using {key} now", environ={"AWS_SECRET_ACCESS_KEY": key}) == (
        "using [REDACTED:env:AWS_SECRET_ACCESS_KEY] now"
    )
    assert redact_value({"password": "/hunter2/horse"}, environ={}) == {
        "password": "[REDACTED:secret-field]"
    }


def test_ordinary_text_is_left_alone() -> None:
    plain = (
        "max_tokens: 500, tokenizer o200k, sessionId s-1, the secret: true, "
        "see https://example.com/docs?page=2 and key=value pairs; sk-short"
    )
    assert redact(plain, environ={}).text == plain
    assert redact_value({"maxTokens": 5, "token": "", "n": None}, environ={}) == {
        "maxTokens": 5,
        "token": "",
        "n": None,
    }
    assert redact_value({"password": "x", "nested": [{"apiKey": "y"}]}, environ={}) == {
        "password": "[REDACTED:secret-field]",
        "nested": [{"apiKey": "[REDACTED:secret-field]"}],
    }


def db_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")))


def found_in(data: bytes, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s.encode() in data]


# --- a handover written by hand ---------------------------------------------------------

PERSONA = "---\nname: dev\ndescription: Works here.\ntools: [read_file]\n---\nYou are dev.\n"
SCENARIO = read_config_scenario("DONE", description="redaction test (scripted)")


@pytest.mark.process
def test_secrets_in_a_handover_file_reach_neither_state_db_nor_the_prompt(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = dev_project(tmp_path, {"s": SCENARIO}, persona=PERSONA)
    handover = project / "by-hand.json"
    doc: dict[str, Any] = {
        "version": "1.0.0",
        "timestamp": "2026-01-01T00:00:00Z",
        "handoverId": "h-secret",
        "source": {"persona": "ops", "sessionId": "", "workingDirectory": str(project)},
        "target": {"persona": "dev", "task": f"Deploy with {LEAKY_TEXT}"},
        "artifacts": {
            "insights": [f"the key is {OPENAI}", f"token {ENV_VALUE}"],
            "data": {"apiKey": "plain-but-named-secret-1234", "note": f"password={URL_PASSWORD}"},
        },
    }
    handover.write_text(json.dumps(doc))
    env = {**os.environ, **ENV, "COLUMNS": "120"}
    env.pop("OPENAI_BASE_URL", None)
    run = subprocess.run(
        [sys.executable, "-m", "personae", "run", "--context-from", str(handover),
         "--non-interactive", "--model", f"scripted:{tmp_path / 's.yaml'}", "--json"],
        cwd=project, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    run_id = json.loads(run.stdout.splitlines()[0])["run_id"]
    shown = subprocess.run(
        [sys.executable, "-m", "personae", "runs", "show", run_id, "--json"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    prompts = "\n".join(c["context_text"] for c in json.loads(shown.stdout)["model_calls"])
    assert "[REDACTED:openai-key]" in prompts and "Deploy with" in prompts
    secrets = [*ALL, "plain-but-named-secret-1234"]
    assert found_in(prompts.encode(), secrets) == []
    assert found_in(run.stdout.encode(), secrets) == []
    db = project / ".personae" / "state.db"
    assert found_in(db_bytes(db), secrets) == []
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    # The results written back into the handover carry no secret either.
    assert found_in(handover.read_bytes(), secrets) == []


# --- the mind -----------------------------------------------------------------------------


def test_mind_observe_recall_and_memory_files_keep_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from personae.mind.server import MindPaths, create_server

    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    memory = tmp_path / ".personae" / "memory"
    memory.mkdir(mode=0o755, parents=True)
    (memory / "ops.md").write_text(  # written by hand, secrets and all
        f"---\nname: Ops notes\ndescription: deploy keys {GITHUB}\ntype: project\n---\n"
        f"- [ ] rotate {OPENAI} before friday\n{LEAKY_TEXT}\n"
    )
    (memory / "commitments.md").write_text(
        f"---\nname: Commitments\ndescription: open\ntype: project\n---\n- call back {AWS}\n"
    )
    prompt = tmp_path / "mind.md"
    prompt.write_text("You are the mind.\n")
    paths = MindPaths(memory_dir=memory, prompt=prompt, store=tmp_path / "state.db")
    server, _ = create_server(paths)
    got: dict[str, Any] = {}

    async def main() -> None:
        async with Client(server) as client:
            got["boot"] = await client.call_tool("bootstrap_session", {})
            got["observe"] = await client.call_tool(
                "observe",
                {"tool_name": "Bash", "args": {"command": f"deploy --token {ENV_VALUE}"},
                 "result": f"ok, used {ANTHROPIC}"},
            )  # fmt: skip
            got["reflect"] = await client.call_tool(
                "reflect", {"observation": f"user pasted {SLACK} and {JWT}", "kind": "user_said"}
            )
            got["recall"] = await client.call_tool("recall", {"query": "deploy token rotate"})
            got["recall2"] = await client.call_tool("recall", {"query": "user pasted"})
            got["read"] = await client.call_tool("read_memory_file", {"name": "ops.md"})
            got["write"] = await client.call_tool(
                "write_memory_file",
                {"name": "new.md",
                 "content": f"---\nname: New\ndescription: d\ntype: note\n---\nkey {GOOGLE}\n"},
            )  # fmt: skip

    anyio.run(main)
    for name, result in got.items():
        assert result.is_error is False, (name, result.content)
    answers = json.dumps({k: v.structured_content for k, v in got.items()})
    assert found_in(answers.encode(), ALL) == []
    assert "[REDACTED:env:DEPLOY_SERVICE_TOKEN]" in answers
    assert "[REDACTED:anthropic-key]" in answers
    assert any(
        f.startswith("secret:") for f in got["observe"].structured_content["cautionary_flags"]
    )
    assert "rotate [REDACTED:openai-key]" in answers  # the packet's open commitments
    assert found_in(db_bytes(tmp_path / "state.db"), ALL) == []
    written = (memory / "new.md").read_text()
    assert GOOGLE not in written and "[REDACTED:google-api-key]" in written
    assert stat.S_IMODE(memory.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "state.db").stat().st_mode) == 0o600
