"""A stand-in for ``personae run --json`` in batch tests (run as a script only).

A real child process that asks the scripted replay server (a real loopback HTTP
server started by the test, URL given as ``--model``) for its answer and prints
the ``start`` and ``final`` events the way ``personae run --json`` does. It costs
a few hundredths of a second of CPU where a full team run costs about two
seconds, so batches of hundreds of tasks stay fast. The task text steers it:
``sleep=S`` waits S seconds first, ``fail=N`` fails the first N attempts. Each
start appends ``{"task", "pid"}`` to ``<cwd>/runs.log`` (to count runs).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import urllib.request
from pathlib import Path

CHILD = Path(__file__).resolve()


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[: argv.index("--")] else None


def main(argv: list[str]) -> int:
    task = argv[argv.index("--") + 1]
    persona, url = _option(argv, "--persona"), _option(argv, "--model")
    log = Path.cwd() / "runs.log"
    with log.open("a") as fh:
        fh.write(json.dumps({"task": task, "pid": os.getpid()}) + "\n")
    run_id = f"run-standin-{os.getpid()}"
    print(json.dumps({"run_id": run_id, "seq": 1, "kind": "start", "data": {"task": task}}))
    sys.stdout.flush()
    sleep = re.search(r"sleep=([0-9.]+)", task)
    time.sleep(float(sleep.group(1)) if sleep else 0)
    fail = re.search(r"fail=([0-9]+)", task)
    if fail and sum(task == json.loads(x)["task"] for x in log.read_text().splitlines()) <= int(
        fail.group(1)
    ):
        print("scripted failure", file=sys.stderr)
        return 1
    body = {"model": "scripted", "messages": [{"role": "user", "content": task}]}
    request = urllib.request.Request(
        f"{url}/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.load(response)["choices"][0]["message"]["content"]
    final = {"run_id": run_id, "seq": 2, "kind": "final", "message": f"{answer} | {persona}",
             "data": {"status": "done"}}  # fmt: skip
    print(json.dumps(final))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
