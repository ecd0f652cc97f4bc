"""``personae doctor``: check what each command needs, one OK/WARN/FAIL line per item with the fix.

In order: the project (found from the current folder up), its config, the model a run
would use (configured, its key present, its server answering a cheap request), the
store (writable), then the host setup (instruction files, hooks, ``.mcp.json``, the mind
server) only when host files that use personae exist (or ``hosts=True``).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import anyio

from personae.errors import PersonaeError, UsageError
from personae.hosts.checkitem import CheckItem
from personae.hosts.hostcheck import check_hooks
from personae.hosts.render import (
    CLAUDE_SETTINGS,
    CODEX_HOOKS,
    COPILOT_HOOKS,
    INSTRUCTION_FILES,
    MCP_JSON,
    check,
    installed_personae,
)
from personae.invocation import personae_argv
from personae.layout import Layout, user_data_dir
from personae.mind._mcp import probe_stdio
from personae.mind.contract import load_contract
from personae.mind.server import MindPaths
from personae.models.reach import probe as probe_endpoint
from personae.models.resolve import (
    Endpoint,
    ModelResolver,
    ModelSpec,
    endpoint_for,
    parse_model_spec,
)
from personae.models.scenario import load_scenario
from personae.models.scripted import ScriptedServer
from personae.persona.cast import Cast
from personae.project import load_config
from personae.settings import PersonaeSettings, chosen_model
from personae.store.health import database_url_for, postgres_problem, sqlite_write_problem
from personae.tools.sandbox import INSTALL_HINT, describe_mode

__all__ = ["diagnose", "host_files_in_use"]

HOST_FILES = (*INSTRUCTION_FILES, CLAUDE_SETTINGS, CODEX_HOOKS, COPILOT_HOOKS, MCP_JSON)
"""Files (relative to the project) through which hosts use personae."""


def host_files_in_use(root: Path) -> list[str]:
    """Host files under ``root`` that mention personae (what ``hosts render --write`` makes)."""
    found = []
    for rel in HOST_FILES:
        path = root / rel
        try:
            if path.is_file() and "personae" in path.read_text(encoding="utf-8", errors="replace"):
                found.append(rel)
        except OSError:
            found.append(rel)  # unreadable: the host checks say why
    return found


def diagnose(
    root: Path,
    paths: MindPaths,
    *,
    probe: bool = True,
    hosts: bool | None = None,
    found_from: Path | None = None,
    timeout: float = 3.0,
) -> list[CheckItem]:
    """Every doctor check for the project at ``root``.

    ``found_from`` is the folder the search for ``.personae/`` started in (shown when it
    differs from ``root``). ``probe=False`` skips what needs a network or a process (the
    model server request, starting the mind server). ``hosts``: ``None`` checks the host
    setup only when host files use personae; ``True``/``False`` forces it on or off.
    """
    items: list[CheckItem] = [_project(root, found_from)]
    config_item, config_base_url, config_model = _config(root)
    items.append(config_item)
    items.extend(_model(root, config_model, config_base_url, probe=probe, timeout=timeout))
    items.append(_store(root))
    items.append(_sandbox(root))
    in_use = host_files_in_use(root)
    if hosts is None:
        hosts = bool(in_use)
    if not hosts:
        items.append(
            CheckItem(
                "hosts",
                "OK",
                "no host files use personae here (optional; not checked)",
                "",
            )
        )
        return items
    items.extend(_host_items(root, paths, probe=probe))
    return items


def _project(root: Path, found_from: Path | None) -> CheckItem:
    if Layout(root).dir.is_dir():
        where = f"{root}"
        if found_from is not None and found_from.resolve() != root:
            where += f" (found from {found_from.resolve()})"
        return CheckItem("project", "OK", f"{where}: .personae/ present")
    start = (found_from or root).resolve()
    data = user_data_dir()
    skipped = (
        f" ({data} is your personae data folder, never a project)"
        if data.is_dir() and data.resolve().parent in (start, *start.parents)
        else ""
    )
    return CheckItem(
        "project",
        "WARN",
        f"no project: no .personae/ in {start} or any folder above it{skipped}; "
        "`personae run` refuses to start here and writes nothing",
        "run `personae init` in the project's top folder (commands find it from any subfolder)",
    )


def _config(root: Path) -> tuple[CheckItem, str | None, str | None]:
    layout = Layout(root)
    try:
        config = load_config(layout)
    except PersonaeError as exc:
        return CheckItem("config", "FAIL", str(exc), "fix the file (see the error)"), None, None
    read = layout.config_file
    detail = f"{read} reads" if read is not None else "no .personae/config.yaml (defaults)"
    return CheckItem("config", "OK", detail), config.base_url, config.model


def _model(
    root: Path,
    config_model: str | None,
    config_base_url: str | None,
    *,
    probe: bool,
    timeout: float,
) -> list[CheckItem]:
    try:
        settings = PersonaeSettings()
    except PersonaeError as exc:
        return [CheckItem("model", "FAIL", str(exc), "fix or unset the variable")]
    chosen, source = chosen_model(None, settings, config_model)
    if not chosen:
        items = [
            CheckItem(
                "model",
                "FAIL",
                "no model configured: `personae run` needs one",
                "export PERSONAE_MODEL=openai:gpt-4o (or anthropic:..., ollama:..., "
                "scripted:FILE.yaml), or add 'model: provider:name' to .personae/config.yaml",
            )
        ]
        spec = None
    else:
        spec = parse_model_spec(chosen, source=source)  # both sources were checked when read
        items = [CheckItem("model", "OK", f"{spec} (from {source})")]
        items.extend(_endpoint(spec, config_base_url, probe=probe, timeout=timeout))
    for own, names in _persona_models(root, spec).items():
        who = ", ".join(names)
        items.append(CheckItem(f"model of {who}", "OK", f"{own} (the persona's own model)"))
        items.extend(_endpoint(own, config_base_url, probe=probe, timeout=timeout, of=str(own)))
    return items


def _persona_models(root: Path, default: ModelSpec | None) -> dict[ModelSpec, list[str]]:
    """The models personas run with instead of the default (a persona's own ``model:``,
    read as a run reads it), each with the personas that name it."""
    try:
        cast = Cast.load(root)
    except PersonaeError:
        return {}  # persona files are `personae personas check`'s to report
    resolver = ModelResolver(default=str(default) if default is not None else None)
    found: dict[ModelSpec, list[str]] = {}
    for name, persona in sorted(cast.personas.items()):
        if not persona.model:
            continue
        try:
            own = resolver.spec_for(persona.model)
        except PersonaeError:
            continue  # a persona's bad model is reported where the persona loads
        if own != default:
            found.setdefault(own, []).append(name)
    return found


def _endpoint(
    spec: ModelSpec,
    config_base_url: str | None,
    *,
    probe: bool,
    timeout: float,
    of: str | None = None,
) -> list[CheckItem]:
    """The checks of the server ``spec`` talks to (``of``: the model, named in each item)."""
    tail = f" ({of})" if of else ""
    if spec.is_scripted:
        return [
            replace(i, name=i.name + tail) for i in _scripted(spec, probe=probe, timeout=timeout)
        ]
    items: list[CheckItem] = []
    endpoint = endpoint_for(spec, config_base_url=config_base_url)
    if endpoint.key_env is None:
        items.append(CheckItem("API key", "OK", f"{endpoint.provider} needs none"))
    elif endpoint.key:
        items.append(CheckItem("API key", "OK", f"{endpoint.key_env} is set"))
    elif endpoint.key_required:
        items.append(
            CheckItem(
                "API key",
                "FAIL",
                f"{endpoint.key_env} is not set",
                f"export {endpoint.key_env}=... (the provider's API key)",
            )
        )
    else:
        items.append(
            CheckItem(
                "API key", "OK", f"{endpoint.key_env} not set (not needed for a local server)"
            )
        )
    if endpoint.base_url is None:
        items.append(
            CheckItem(
                "provider reachable",
                "FAIL",
                f"{spec.provider} models need a base URL",
                "set OPENAI_BASE_URL or 'base_url:' in .personae/config.yaml",
            )
        )
    elif not probe:
        items.append(
            CheckItem("provider reachable", "WARN", f"{endpoint.base_url} not asked (--no-probe)")
        )
    else:
        items.append(_reach(endpoint, timeout))
    return [replace(i, name=i.name + tail) for i in items]


def _reach(endpoint: Endpoint, timeout: float) -> CheckItem:
    answer = probe_endpoint(endpoint, timeout=timeout)
    if answer.ok:
        return CheckItem("provider reachable", "OK", answer.detail)
    if "refused the key" in answer.detail:
        fix = f"check {endpoint.key_env} (a valid key for {endpoint.provider})"
    else:
        fix = "start the server, or fix the base URL (OPENAI_BASE_URL, 'base_url:' in config)"
    return CheckItem("provider reachable", "FAIL", answer.detail, fix)


def _scripted(spec: ModelSpec, *, probe: bool, timeout: float) -> list[CheckItem]:
    path = spec.scenario_path
    try:
        scenario = load_scenario(path)
    except PersonaeError as exc:
        return [CheckItem("scenario", "FAIL", str(exc), "fix the scenario file (docs/models.md)")]
    items = [CheckItem("scenario", "OK", f"{path} loads (scripted replay server, no network)")]
    if not probe:
        return items
    with ScriptedServer(scenario) as server:
        endpoint = Endpoint(
            provider="scripted", base_url=server.base_url, key_env=None, key_required=False
        )
        item = _reach(endpoint, timeout)
    return [*items, replace(item, name="scripted replay server")]


def _store(root: Path) -> CheckItem:
    folder = Layout(root).dir
    db = Layout(root).state_db
    try:
        url = database_url_for(db)
    except PersonaeError as exc:
        return CheckItem("store", "FAIL", str(exc), "fix database_url in .personae/config.yaml")
    if url:
        problem = postgres_problem(db, url)
        if problem is not None:
            return CheckItem(
                "store",
                "FAIL",
                problem,
                "check PERSONAE_DATABASE_URL / database_url (docs/postgres.md)",
            )
        return CheckItem("store", "OK", "PostgreSQL store reachable and migrated")
    if not folder.is_dir():
        return CheckItem("store", "WARN", f"{db} cannot exist yet (no .personae/)", "personae init")
    if not db.exists():
        if os.access(folder, os.W_OK | os.X_OK):
            return CheckItem("store", "OK", f"{db} will be created by the first run")
        return CheckItem(
            "store", "FAIL", f"{folder} is not writable", f"chmod u+w {folder} (or fix its owner)"
        )
    problem = sqlite_write_problem(db)
    if problem is not None:
        return CheckItem(
            "store",
            "FAIL",
            f"{db} is not writable: {problem}",
            f"check the permissions of {db} and {folder} (or move a broken file away)",
        )
    return CheckItem("store", "OK", f"{db} is writable")


def _host_items(root: Path, paths: MindPaths, *, probe: bool) -> list[CheckItem]:
    """The mind server and host files, for projects whose hosts use personae."""
    items: list[CheckItem] = []
    contract = load_contract(paths.prompt)
    items.append(
        CheckItem.judged(
            "mind contract",
            contract.available,
            f"{paths.prompt} assembles ({len(contract.text)} chars)"
            if contract.available
            else str(contract.reason),
            f"create {paths.prompt} (or pass --prompt FILE) and fix its @include lines",
        )
    )
    has_memory = paths.memory_dir.is_dir()
    items.append(
        CheckItem.judged(
            "memory directory",
            has_memory,
            str(paths.memory_dir) if has_memory else f"{paths.memory_dir} does not exist",
            f"mkdir -p {paths.memory_dir} (memory files are Markdown with "
            "name/description/type frontmatter)",
        )
    )
    try:
        entry = installed_personae()
        items.append(CheckItem("personae entry point", "OK", f"{entry} (host files run it)"))
    except UsageError as exc:
        fix = "install personae (pipx install .) so hosts can run it"
        items.append(CheckItem("personae entry point", "FAIL", str(exc), fix))
    if probe:
        items.append(_probe(root, paths))
    items.extend(check(root))
    items.extend(check_hooks(root))
    return items


def _sandbox(root: Path) -> CheckItem:
    """Which ``run_shell`` mode a run here gets: OK sandboxed, WARN off or unsandboxed,
    FAIL when commands would be refused."""
    try:
        mode = load_config(Layout(root)).sandbox.mode
    except PersonaeError:  # the config check reports it
        mode = "auto"
    line = describe_mode(mode)
    name = "run_shell sandbox (bubblewrap)"
    if line.startswith("bwrap"):
        return CheckItem(name, "OK", f"mode {mode}: runs {line}", "")
    if line.startswith("off"):
        return CheckItem(name, "WARN", f"mode off: commands run unsandboxed ({line})",
                         "set sandbox.mode: auto or required in .personae/config.yaml")  # fmt: skip
    fix = f"{INSTALL_HINT}; until then run_shell is not sandboxed"
    if line.startswith("refused"):
        return CheckItem(name, "FAIL", f"mode {mode}: commands are {line}", fix)
    return CheckItem(name, "WARN", f"mode {mode}: commands run {line}", fix)


def _probe(root: Path, paths: MindPaths) -> CheckItem:
    argv = personae_argv(
        "serve", "--memory-dir", str(paths.memory_dir), "--store", str(paths.store)
    )
    if paths.prompt is not None:
        argv += ["--prompt", str(paths.prompt)]
    env = dict(os.environ)

    async def call() -> dict[str, object]:
        with anyio.fail_after(60):
            return await probe_stdio(argv[0], argv[1:], cwd=root, env=env)

    try:
        packet = anyio.run(call)
    except Exception as exc:
        return CheckItem(
            "server answers bootstrap",
            "FAIL",
            f"{type(exc).__name__}: {exc}",
            "run `personae serve` by hand and read its stderr",
        )
    ok = packet.get("mind_contract_available") is True
    return CheckItem.judged(
        "server answers bootstrap",
        ok,
        f"bootstrap_session returned schema {packet.get('schema_version')}, "
        f"mind_contract_available={packet.get('mind_contract_available')}",
        "fix the mind contract (see above)",
    )
