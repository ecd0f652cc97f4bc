"""``personae doctor``: check the local setup, one OK/FAIL line per item with the fix."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from personae.hosts.hostcheck import check_hooks
from personae.hosts.render import CheckItem, check
from personae.mind.contract import load_contract
from personae.mind.server import MindPaths

__all__ = ["diagnose"]


def diagnose(root: Path, paths: MindPaths, *, probe: bool = True) -> list[CheckItem]:
    """Every doctor check for the project at ``root``."""
    items: list[CheckItem] = []
    contract = load_contract(paths.prompt)
    items.append(
        CheckItem(
            "mind contract",
            contract.available,
            f"{paths.prompt} assembles ({len(contract.text)} chars)"
            if contract.available
            else str(contract.reason),
            ""
            if contract.available
            else f"create {paths.prompt} (or pass --prompt FILE) and fix its @include lines",
        )
    )
    has_memory = paths.memory_dir.is_dir()
    items.append(
        CheckItem(
            "memory directory",
            has_memory,
            str(paths.memory_dir) if has_memory else f"{paths.memory_dir} does not exist",
            ""
            if has_memory
            else f"mkdir -p {paths.memory_dir} (memory files are Markdown with "
            "name/description/type frontmatter)",
        )
    )
    on_path = shutil.which("personae") is not None
    items.append(
        CheckItem(
            "personae on PATH",
            on_path,
            "hooks and MCP entries run `personae`" if on_path else "`personae` not found on PATH",
            "" if on_path else "install personae (pipx install personae) so hosts can run it",
        )
    )
    if probe:
        items.append(_probe(root, paths))
    items.extend(check(root))
    items.extend(check_hooks(root))
    return items


def _probe(root: Path, paths: MindPaths) -> CheckItem:
    import anyio

    from personae.mind._mcp import probe_stdio

    args = [
        "-m",
        "personae",
        "serve",
        "--memory-dir",
        str(paths.memory_dir),
        "--store",
        str(paths.store),
    ]
    if paths.prompt is not None:
        args += ["--prompt", str(paths.prompt)]
    env = dict(os.environ)

    async def call() -> dict[str, object]:
        with anyio.fail_after(60):
            return await probe_stdio(sys.executable, args, cwd=root, env=env)

    try:
        packet = anyio.run(call)
    except Exception as exc:
        return CheckItem(
            "server answers bootstrap",
            False,
            f"{type(exc).__name__}: {exc}",
            "run `personae serve` by hand and read its stderr",
        )
    ok = packet.get("mind_contract_available") is True
    return CheckItem(
        "server answers bootstrap",
        ok,
        f"bootstrap_session returned schema {packet.get('schema_version')}, "
        f"mind_contract_available={packet.get('mind_contract_available')}",
        "" if ok else "fix the mind contract (see above)",
    )
