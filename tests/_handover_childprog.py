"""A real child program for handover tests: a stand-in for `personae run --context-from`.

It goes through the real receiving side (``runflow.begin`` / ``finish``) and
behaves as the handover's ``artifacts.data.behave`` says:
``{"sleep": s, "fail_times": n, "exit": code, "grandchild": true, "no_results": true}``.
Each invocation appends a line to ``<cwd>/started.log`` when it starts and to
``<cwd>/calls.log`` (handover id, persona, start, end) when its work is done,
so tests can count attempts and measure overlap. Run as a script only; its own test
is in test_handover_executor.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

CHILD = Path(__file__).resolve()


def command(spec: object) -> list[str]:
    """A handover command builder that runs this program instead of `personae run`."""
    return [
        sys.executable,
        str(CHILD),
        "--persona",
        spec.persona,  # type: ignore[attr-defined]
        "--context-from",
        str(spec.handover_path),  # type: ignore[attr-defined]
    ]


def calls(cwd: Path, log_name: str = "calls.log") -> list[dict[str, object]]:
    """The invocations logged in ``cwd/calls.log`` (finished) or ``started.log``."""
    log = cwd / log_name
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _main(argv: list[str]) -> int:
    from personae.handover import runflow

    path = argv[argv.index("--context-from") + 1]
    persona = argv[argv.index("--persona") + 1]
    cwd = Path.cwd()
    start = time.time()
    session = runflow.begin(path, persona, cwd=cwd, non_interactive=True)
    behave = session.handover.artifacts.data.get("behave", {})
    hid = session.handover.handover_id
    with (cwd / "started.log").open("a") as log:
        log.write(json.dumps({"id": hid, "persona": persona, "start": start}) + "\n")
    previous = [c for c in calls(cwd) if c["id"] == hid]
    if behave.get("grandchild"):
        grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        # written whole, then renamed: a test polling for the file never reads it empty
        part = cwd / f"grandchild-{hid}.pid.part"
        part.write_text(str(grand.pid))
        part.replace(cwd / f"grandchild-{hid}.pid")
    time.sleep(float(behave.get("sleep", 0)))
    failing = len(previous) < int(behave.get("fail_times", 0))
    with (cwd / "calls.log").open("a") as log:
        entry = {"id": hid, "persona": persona, "start": start, "end": time.time()}
        log.write(json.dumps(entry) + "\n")
    if behave.get("no_results"):
        print(f"plain output from {persona}")
        return int(behave.get("exit", 0))
    if failing:
        runflow.finish(session, status="failure", output=None, error="scripted failure")
        return 1
    history = "; ".join(f"{h.persona}={h.summary}" for h in session.handover.context.history)
    output = f"{persona} did: {session.prompt} | history: {history}"
    runflow.finish(
        session,
        status=behave.get("status", "success"),
        output=output,
        artifacts=[f"out-{persona}.txt"],
        next_steps=[f"review {persona}"],
    )
    return int(behave.get("exit", 0))


if __name__ == "__main__":
    sys.path.insert(0, str(CHILD.parents[1] / "src"))
    os.environ.setdefault("PERSONAE_HANDOVER_MODE", "1")
    sys.exit(_main(sys.argv[1:]))
