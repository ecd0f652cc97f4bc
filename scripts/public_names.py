"""List public top-level names defined in more than one module under ``src/personae``.

A public name is a class, function or constant defined at a module's top level
that is listed in the module's ``__all__`` (when it declares one) or does not
start with ``_`` (when it does not); with ``--loose``, any top-level name not
starting with ``_`` counts too, ``__all__`` or not (module-level ``app``,
``logger`` ...). Re-exports (imports) are not definitions. Prints one line per
name with the modules that define it, then the count. Usage::

    python scripts/public_names.py [--loose] [SRC_DIR]
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path


def _exported(tree: ast.Module) -> set[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                value = node.value
                if isinstance(value, ast.List | ast.Tuple):
                    return {e.value for e in value.elts if isinstance(e, ast.Constant)}
    return None


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names - {"__all__"}


def public_names(src: Path, *, loose: bool = False) -> dict[str, list[str]]:
    """Public name -> modules defining it (only names defined in two or more)."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        exported = _exported(tree)
        module = ".".join(path.relative_to(src.parent).with_suffix("").parts)
        for name in sorted(_defined(tree)):
            listed = exported is not None and name in exported
            unlisted_ok = exported is None or loose
            if listed or (unlisted_ok and not name.startswith("_")):
                where[name].append(module)
    return {name: mods for name, mods in sorted(where.items()) if len(mods) > 1}


def main(argv: list[str]) -> int:
    loose = "--loose" in argv
    args = [a for a in argv[1:] if a != "--loose"]
    src = Path(args[0]) if args else Path(__file__).resolve().parents[1] / "src/personae"
    twice = public_names(src, loose=loose)
    for name, modules in twice.items():
        print(f"{name}: {', '.join(modules)}")
    print(f"{len(twice)} public name(s) defined in more than one module")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
