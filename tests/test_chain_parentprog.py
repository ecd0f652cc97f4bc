"""A real parent program for chain tests: runs a workflow with the test child program.

``python test_chain_parentprog.py WORKFLOW [--resume] [--concurrency N]``; exits
with the chain's exit code. Run as a script only (tests kill it with SIGKILL).
"""

from __future__ import annotations

import sys
from pathlib import Path

PARENT = Path(__file__).resolve()


def _main(argv: list[str]) -> int:
    from personae.workflow.chain import execute_chain
    from personae.workflow.executors import LocalProcessExecutor
    from personae.workflow.spec import load_workflow
    from test_handover_childprog import command

    concurrency = int(argv[argv.index("--concurrency") + 1]) if "--concurrency" in argv else 2
    outcome = execute_chain(
        load_workflow(argv[0]),
        resume="--resume" in argv,
        concurrency=concurrency,
        executor=LocalProcessExecutor(command=command),
    )
    print(outcome.status)
    return outcome.exit_code


def test_parent_program_runs_a_workflow(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "w.yaml").write_text("name: one\nsteps:\n  - {id: a, persona: p, task: go}\n")
    done = subprocess.run(
        [sys.executable, str(PARENT), str(tmp_path / "w.yaml")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "success"
    assert (tmp_path / ".personae" / "chains" / "one" / "report.md").exists()


if __name__ == "__main__":
    sys.path[:0] = [str(PARENT.parents[1] / "src"), str(PARENT.parent)]
    sys.exit(_main(sys.argv[1:]))
