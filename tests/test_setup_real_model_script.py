"""The real-model setup step finds its cached wheel under the test script's shell options.

``scripts/test.sh`` runs with ``set -euo pipefail`` and sources every
``scripts/setup.d`` step. On a cold cache (no llama-cpp-python wheel built yet)
the lookup of the cached wheel must answer "none" and let the step go on to
build it; an ``ls | head`` pipeline once failed there and ended the whole setup
with exit code 2 and no message. The step's own function is run here, taken
from the script, in real bash with those options.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "setup.d" / "80-real-model.sh"


def _version() -> str:
    """The llama-cpp-python version the script pins."""
    found = re.search(r'^LLAMA_CPP_VERSION="([^"]+)"', SCRIPT.read_text(), re.MULTILINE)
    assert found is not None, f"{SCRIPT}: LLAMA_CPP_VERSION not found"
    return found.group(1)


def _lookup(wheels: Path) -> subprocess.CompletedProcess[str]:
    text = SCRIPT.read_text()
    function = re.search(r"^_cached_wheel\(\) \{\n.*?^\}\n", text, re.MULTILINE | re.DOTALL)
    assert function, f"{SCRIPT}: _cached_wheel() not found"
    program = (
        "set -euo pipefail\n"
        f'LLAMA_CPP_VERSION="{_version()}"\n'
        f'_wheels="{wheels}"\n'
        f"{function.group(0)}"
        '_wheel=$(_cached_wheel)\necho "found:${_wheel}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", program], check=False, capture_output=True, text=True, timeout=30
    )
    return done


def test_a_cold_cache_finds_no_wheel_and_the_setup_goes_on(tmp_path: Path) -> None:
    done = _lookup(tmp_path / "wheels-not-made-yet")
    assert (done.returncode, done.stdout) == (0, "found:\n"), done.stderr


def test_a_warm_cache_finds_the_wheel_of_the_pinned_version(tmp_path: Path) -> None:
    (tmp_path / "llama_cpp_python-0.0.1-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    wheel = tmp_path / f"llama_cpp_python-{_version()}-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"")
    done = _lookup(tmp_path)
    assert (done.returncode, done.stdout) == (0, f"found:{wheel}\n"), done.stderr
