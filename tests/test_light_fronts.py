"""Light fronts: a package file adds no weight to the modules below it, and ``personae
--help`` loads neither pydantic-ai nor asyncio nor any part of the runtime.

The static check walks every module's import-time imports (``ast``, through
``scripts/layers.py``): importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``,
so a package file that imports its whole package makes every leaf pay for it. Two child
interpreters confirm the real thing (a fresh ``sys.modules`` is the point, so the process
boundary is needed).
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import types

import pytest

from _layers import layers

HEAVY = "pydantic_ai"


def _import_time_edges() -> tuple[dict[str, set[str]], set[str]]:
    """Module -> personae modules it imports at import time; the modules that import
    pydantic-ai themselves."""
    graph = layers.build()
    edges = graph.edges(["module"])
    direct: set[str] = set()
    for name, path in graph.modules.items():
        _, tree = layers.parse(path)
        is_package = path.name == "__init__.py"
        for node, kind, _ in layers._walk(tree.body, "module"):
            if kind != "module":
                continue
            roots = {n.split(".")[0] for n in layers._resolve(name, is_package, node)}
            if HEAVY in roots:
                direct.add(name)
    return edges, direct


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _loads_heavy(
    module: str, edges: dict[str, set[str]], direct: set[str], *, fronts: bool
) -> bool:
    """Whether importing ``module`` loads pydantic-ai; ``fronts``: count the package files
    Python runs on the way (``False``: only what each module itself imports)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current in direct:
            return True
        todo.extend(edges.get(current, ()))
        if fronts:
            todo.extend(p for p in _parents(current) if p in edges)
    return False


def test_no_package_file_makes_a_leaf_load_pydantic_ai() -> None:
    edges, direct = _import_time_edges()
    assert direct, "no module imports pydantic-ai: the check would prove nothing"
    weighed = [
        m
        for m in sorted(edges)
        if _loads_heavy(m, edges, direct, fronts=True)
        and not _loads_heavy(m, edges, direct, fronts=False)
    ]
    assert weighed == [], f"a package file loads pydantic-ai for these modules: {weighed}"
    light = [m for m in edges if not _loads_heavy(m, edges, direct, fronts=True)]
    assert "personae.team.events" in light
    assert len(light) > len(edges) // 2


def _child(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


LOADED = (
    "import sys\n"
    "heavy = ('pydantic_ai', 'pydantic_ai_slim', 'openai', 'httpx', 'asyncio')\n"
    "print(*sorted(m for m in sys.modules if m.split('.')[0] in heavy"
    " or m.startswith(('personae.team.', 'personae.context.', 'personae.store.'))))\n"
)


@pytest.mark.process
def test_a_leaf_module_loads_only_what_it_needs() -> None:
    loaded = _child("import personae.team.events\n" + LOADED)
    # the events' payload types: the status, the plan and verdict models, dispatch's actions,
    # a sub-agent's context mode (the context package's front is lazy: nothing else of it)
    assert loaded == [
        "personae.context.modes",
        "personae.store.status",
        "personae.team.dispatch",
        "personae.team.events",
        "personae.team.signals",
    ]


@pytest.mark.process
def test_help_loads_no_runtime() -> None:
    code = (
        "import contextlib, io\n"
        "from personae.cli.app import run_cli\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert run_cli(['--help']) == 0\n"
        "assert 'Usage: personae' in out.getvalue(), out.getvalue()\n" + LOADED
    )
    assert _child(code) == []


@pytest.mark.parametrize(
    "package", ["personae", "personae.context", "personae.tools", "personae.mind"]
)
def test_lazy_fronts_export_their_names_not_modules(package: str) -> None:
    """Every exported name resolves to its object, also once every module of the package
    is loaded (a submodule of the same name must not shadow it)."""
    front = importlib.import_module(package)
    if package != "personae":
        for info in pkgutil.iter_modules(front.__path__, package + "."):
            if not info.name.endswith(".__main__"):  # an entry point runs when imported
                importlib.import_module(info.name)
    for name in front.__all__:
        value = getattr(front, name)
        assert not isinstance(value, types.ModuleType), f"{package}.{name} is a module"
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        getattr(front, "nothing_here")  # noqa: B009


@pytest.mark.process
def test_help_converts_no_command_and_loads_no_markdown() -> None:
    """``personae --help`` lists every command by its help: it converts none of them
    (Typer reads each function's signature to do so), and loads neither rich's markdown
    (markdown-it) nor its tracebacks (pygments); ``personae run --help`` converts ``run``."""
    code = (
        "import contextlib, io, sys\n"
        "import typer.main\n"
        "converted = []\n"
        "real = typer.main.get_command_from_info\n"
        "def spy(command_info, **kw):\n"
        "    converted.append(command_info.callback.__name__)\n"
        "    return real(command_info, **kw)\n"
        "typer.main.get_command_from_info = spy\n"
        "from personae.cli.app import run_cli\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert run_cli(sys.argv[1:]) == 0\n"
        "assert 'Usage: personae' in out.getvalue(), out.getvalue()\n"
        "heavy = ('rich.markdown', 'rich.traceback', 'markdown_it', 'pygments')\n"
        "print(*converted, *(m for m in sys.modules if m.startswith(heavy)))\n"
    )

    def child(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert child("--help") == []
    assert child("run", "--help") == ["run"]


def test_the_root_help_shows_each_command_as_converted() -> None:
    """What the root's help lists without converting (name, help, panel, hidden) is
    what the converted command has, for every command and noun group."""
    import typer.main

    from personae.cli._fast_help import LazyRoot
    from personae.cli.app import app

    root = typer.main.get_command(app)
    assert isinstance(root, LazyRoot)
    ctx = root.make_context("personae", ["--version"], resilient_parsing=True)
    names = root.list_commands(ctx)
    assert {"run", "demo", "runs", "handover", "hook"} <= set(names)

    def shown(cmd: object) -> tuple[object, ...]:
        keys = ("name", "help", "short_help", "hidden", "deprecated", "rich_help_panel")
        return tuple(getattr(cmd, key) for key in keys)

    root._listing = True
    listed = [shown(root.get_command(ctx, name)) for name in names]
    root._listing = False
    assert listed == [shown(root.get_command(ctx, name)) for name in names]
    assert list(root.commands) == names


def test_the_stand_ins_make_rich_markdown_and_tracebacks() -> None:
    """The stand-ins ``typer.rich_utils`` imports make the real rich objects."""
    from rich.markdown import Markdown
    from rich.traceback import Traceback

    from personae.cli import _fast_help

    assert isinstance(_fast_help._Markdown("# title"), Markdown)
    try:
        raise ValueError("boom")
    except ValueError as exc:
        trace = _fast_help._Traceback.from_exception(type(exc), exc, exc.__traceback__)
    assert isinstance(trace, Traceback)
