"""LangChain's own ``trim_messages`` unit tests, run against personae's drop-in.

The tests come from langchain-core's source distribution on the package
registry (``pip download --no-binary :all: --no-deps``, the version installed
here, within the range below), cached under ``$PERSONAE_CI_CACHE``. They run
unchanged in a child pytest whose conftest puts personae's ``trim_messages``
where the tests import LangChain's from. Every one must pass, except those in
``EXPECTED_DIFFERENCES``: tests that assert a result LangChain users report as a
bug (an orphaned tool result, a lost latest turn), each listed in
docs/integrations.md with its reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
LANGCHAIN_CORE = SpecifierSet(">=1.8.3,<1.9")
TESTS_IN_SDIST = "tests/unit_tests/messages/test_utils.py"
TRIM_TESTS = 21  # trim_messages tests in test_utils.py for the range above
EXPECTED_DIFFERENCES: dict[str, str] = {}
"""LangChain test name -> why personae's result differs on purpose (none at present)."""

CONFTEST = """
import langchain_core.messages
import langchain_core.messages.utils
import pytest

from personae.integrations.langchain import trim_messages as personae_trim_messages

langchain_core.messages.utils.trim_messages = personae_trim_messages
langchain_core.messages.trim_messages = personae_trim_messages


@pytest.fixture(autouse=True)
def _the_drop_in_is_what_runs(request):
    used = getattr(request.module, "trim_messages", None)
    assert used is personae_trim_messages, f"the tests run {used!r}, not personae's drop-in"
"""


def _cache_dir() -> Path:
    base = Path(os.environ.get("PERSONAE_CI_CACHE") or Path.home() / ".cache" / "personae-ci")
    return base / "langchain-core-sdist"


def _sdist(wanted: str, tmp: Path) -> Path:
    """langchain-core ``wanted``'s sdist, from the cache or downloaded into it."""
    cache = _cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        cache = tmp / "sdist"
        cache.mkdir()
    name = f"langchain_core-{wanted}.tar.gz"
    if (cache / name).is_file():
        return cache / name
    fetch = tmp / "download"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
            "-d",
            str(fetch),
            f"langchain-core=={wanted}",
        ],
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    got = fetch / name
    if done.returncode != 0 or not got.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        pytest.fail(
            f"could not download langchain-core {wanted}'s source distribution from the "
            f"package registry (pip download exit {done.returncode}): {' | '.join(tail)}",
            pytrace=False,
        )
    shutil.copy2(got, cache / f".{name}.part")
    (cache / f".{name}.part").replace(cache / name)
    return cache / name


def _extract_tests(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.endswith("/" + TESTS_IN_SDIST)]
        assert len(members) == 1, f"{sdist.name} has no {TESTS_IN_SDIST}"
        source = tar.extractfile(members[0])
        assert source is not None
        target = into / "test_utils.py"
        target.write_bytes(source.read())
    return target


@pytest.mark.timeout(900)  # the first run downloads the sdist (pip builds its metadata)
@pytest.mark.process
def test_langchains_own_trim_messages_tests_pass_with_the_drop_in(tmp_path: Path) -> None:
    installed = version("langchain-core")
    if installed not in LANGCHAIN_CORE:
        pytest.fail(
            f"langchain-core {installed} is installed; this conformance run is pinned to "
            f"langchain-core{LANGCHAIN_CORE} (update the range and EXPECTED_DIFFERENCES)",
            pytrace=False,
        )
    run = tmp_path / "run"
    run.mkdir()
    _extract_tests(_sdist(installed, tmp_path), run)
    (run / "conftest.py").write_text(CONFTEST)
    (run / "pytest.ini").write_text("[pytest]\n")
    report = run / "report.xml"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(run)])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-k",
            "trim_messages",
            "--junitxml",
            str(report),
            "test_utils.py",
        ],
        cwd=run,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert report.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[case.attrib["name"]] = kinds[0] if kinds else "passed"
    assert len(outcomes) == TRIM_TESTS, sorted(outcomes)
    failed = {name for name, outcome in outcomes.items() if outcome != "passed"}
    assert failed == set(EXPECTED_DIFFERENCES), done.stdout[-6000:]


def test_each_expected_difference_is_in_the_docs() -> None:
    docs = " ".join((ROOT / "docs" / "integrations.md").read_text().split())
    assert f"the {TRIM_TESTS} `trim_messages` tests" in docs
    passing = TRIM_TESTS - len(EXPECTED_DIFFERENCES)
    assert f"all {TRIM_TESTS} pass" in docs or f"{passing} pass" in docs
    for name, reason in EXPECTED_DIFFERENCES.items():
        assert name in docs and " ".join(reason.split()) in docs, name
