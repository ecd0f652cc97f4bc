"""A real parent program for chain tests: runs a workflow with the test child program.

``python _chain_parentprog.py WORKFLOW [--resume] [--concurrency N]``; exits
with the chain's exit code. Run as a script only (tests kill it with SIGKILL); its
own test is in test_chain_run.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

PARENT = Path(__file__).resolve()


def _main(argv: list[str]) -> int:
    from _handover_childprog import command
    from personae.workflow.chain import execute_chain
    from personae.workflow.executors import LocalProcessExecutor
    from personae.workflow.spec import load_workflow

    concurrency = int(argv[argv.index("--concurrency") + 1]) if "--concurrency" in argv else 2
    outcome = execute_chain(
        load_workflow(argv[0]),
        resume="--resume" in argv,
        concurrency=concurrency,
        executor=LocalProcessExecutor(command=command),
    )
    print(outcome.status)
    return outcome.exit_code


if __name__ == "__main__":
    sys.path[:0] = [str(PARENT.parents[1] / "src"), str(PARENT.parent)]
    sys.exit(_main(sys.argv[1:]))
