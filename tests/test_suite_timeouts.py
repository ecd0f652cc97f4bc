"""The suite's own guards against hangs: every test has pytest-timeout's limit, and an
async body run with ``run_async`` is cancelled at its deadline with a clear failure."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from _helpers import run_async


def test_every_test_has_the_suite_timeout(request: pytest.FixtureRequest) -> None:
    assert float(request.config.getini("timeout")) == 300
    assert request.config.pluginmanager.hasplugin("timeout")


def test_a_hung_async_body_is_cancelled_and_fails_saying_so() -> None:
    cleaned: list[str] = []

    async def hangs() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.append("finally ran")

    with pytest.raises(pytest.fail.Exception, match=r"still running after 0.2 s \(cancelled\)"):
        run_async(hangs(), timeout=0.2)
    assert cleaned == ["finally ran"]


def test_the_bodys_own_timeout_error_passes_through() -> None:
    async def gives_up() -> None:
        raise TimeoutError("the code under test timed out")

    with pytest.raises(TimeoutError, match="code under test"):
        run_async(gives_up())
    assert run_async(asyncio.sleep(0, result=7)) == 7


@pytest.mark.process
def test_a_hung_test_fails_with_a_clear_message_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "test_hang.py").write_text(
        "import time\n\ndef test_hangs():\n    time.sleep(60)\n\ndef test_after():\n    pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "timeout=1",
         "-rf", "test_hang.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Timeout (>1.0s) from pytest-timeout" in done.stdout
    assert "1 failed, 1 passed" in done.stdout
