"""A ``.personae/project/`` tree with realistic file sizes (shared by tests and bench)."""

from __future__ import annotations

import subprocess
from pathlib import Path

PROSE = "The builder reads the step, follows locked decisions and checks the acceptance list. "
MD = "## Part {i}\nFirst sentence of part {i}. " + PROSE * 4 + "\n- item one\n- item two\n"


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=root,
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
            "HOME": str(root),
            "PATH": "/usr/bin:/bin",
        },
    )


def sized_project(root: Path) -> Path:
    """A project with realistic file sizes: 6.5 KB STEP.md, 11 KB codebase notes,
    a research folder with summaries, reference docs and 40 commits."""
    base = root / ".personae" / "project"
    step_dir = base / "goals" / "01-feed" / "02-profile"
    for d in (base / "codebase", base / "research", base / "reference", step_dir / "tasks"):
        d.mkdir(parents=True, exist_ok=True)
    (base / "VISION.md").write_text(
        "# Vision\n\nBuild a platform where creators share short-form content. " + PROSE * 10,
        encoding="utf-8",
    )
    (base / "STATE.md").write_text("Current step: 01-feed/02-profile\n", encoding="utf-8")
    step = "# Step 2: Build the user profile page\n\n" + "".join(MD.format(i=i) for i in range(12))
    step += "\n## Decisions\n### Locked\n- Use SQLite\n### Flexible\n- Styling approach\n"
    (step_dir / "STEP.md").write_text(step[:6500], encoding="utf-8")
    (step_dir / "RESEARCH.md").write_text("# Step research\n" + PROSE * 20, encoding="utf-8")
    (step_dir / "tasks" / "profile-page.md").write_text(
        "# Task: profile page\n\nRender the profile page component with avatar and bio.\n"
        "## Acceptance\n- page shows avatar\n- bio is editable\n",
        encoding="utf-8",
    )
    (base / "codebase" / "CONVENTIONS.md").write_text(
        "# Conventions\n" + "".join(MD.format(i=i) for i in range(12))[:5500], encoding="utf-8"
    )
    (base / "codebase" / "STRUCTURE.md").write_text(
        "# Structure\n" + "".join(MD.format(i=i) for i in range(12))[:5500], encoding="utf-8"
    )
    (base / "codebase" / "CONVENTIONS_SUMMARY.md").write_text(
        "# Conventions (summary)\n" + PROSE * 6, encoding="utf-8"
    )
    (base / "codebase" / "SUMMARY.md").write_text("# Codebase\n" + PROSE * 8, encoding="utf-8")
    (base / "research" / "FEATURES.md").write_text(
        "# Features\n" + "".join(MD.format(i=i) for i in range(10)), encoding="utf-8"
    )
    (base / "research" / "SUMMARY.md").write_text("# Research\n" + PROSE * 8, encoding="utf-8")
    (base / "reference" / "api.md").write_text("# API reference\n" + PROSE * 30, encoding="utf-8")
    _git(root, "init", "-q")
    for i in range(40):
        (root / "log.txt").write_text(str(i), encoding="utf-8")
        _git(root, "add", "log.txt")
        _git(root, "commit", "-q", "-m", f"profile work {i}: adjust the avatar upload path")
    return root
