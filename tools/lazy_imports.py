"""The import-time weight of ascendprof's modules, from their source alone (no import).

A module is *heavy* when importing it loads one of :data:`HEAVY` (Arrow, pandas, numpy, the
plotting, terminal and database libraries: 0.05-1 s of start-up each): it imports one at module level, or a
module (or a parent package) that is heavy. The rule checked by tests/test_architecture.py: a
function-local import of an ascendprof module is allowed only in a module that is light itself
and only of a heavy one, i.e. where it keeps a light path light (``ascendprof --help``, ``scan``,
the unchanged re-run that restores its outputs from the cache). Anything else goes to the top.

    python tools/lazy_imports.py        # list the function-local imports that break the rule
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ascendprof"
HEAVY = ("pyarrow", "pandas", "numpy", "bokeh", "jinja2", "duckdb", "perfetto", "rich", "dask")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(node) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(stmt, current: str, is_pkg: bool) -> list[str]:
    if isinstance(stmt, ast.Import):
        return [(a.name, []) for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        if stmt.level:
            base = current.split(".")
            base = base[: len(base) - stmt.level + (1 if is_pkg else 0)]
            mod = ".".join(base + ([stmt.module] if stmt.module else []))
        else:
            mod = stmt.module or ""
        # "from pkg import sub" imports the submodule pkg.sub (resolved in violations)
        return [(mod, [a.name for a in stmt.names])]
    return []


def scan():
    """{module: (top-level imports, [(line, imported, importer_func)] local imports)}."""
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top, local = [], []
        is_pkg = path.name == "__init__.py"

        def visit(body, in_func):
            for stmt in body:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    for mod, names in _imports(stmt, name, is_pkg):
                        if in_func:
                            if mod.startswith("ascendprof"):
                                local.append((stmt.lineno, mod, names))
                        else:
                            top.append(mod)
                            top.extend(f"{mod}.{n}" for n in names)
                elif isinstance(stmt, ast.If) and not in_func and _type_checking(stmt):
                    continue
                elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    visit(stmt.body, True)
                elif isinstance(stmt, ast.ClassDef):
                    visit(stmt.body, in_func)
                else:
                    for field in ("body", "orelse", "finalbody", "handlers"):
                        sub = getattr(stmt, field, None)
                        if isinstance(sub, list):
                            visit([s for s in sub if isinstance(s, ast.stmt)] +
                                  [s for h in sub if isinstance(h, ast.ExceptHandler)
                                   for s in h.body], in_func)
        visit(tree.body, False)
        mods[name] = (top, local)
    return mods


def heavy_modules(mods) -> set[str]:
    heavy: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, (top, _) in mods.items():
            if name in heavy:
                continue
            deps = set()
            for t in top:
                deps.add(t)
                parts = t.split(".")  # importing a.b.c runs a/__init__ and a/b/__init__ too
                deps.update(".".join(parts[:i]) for i in range(1, len(parts)))
            parents = name.split(".")
            deps.update(".".join(parents[:i]) for i in range(1, len(parents)))
            if any(d.split(".")[0] in HEAVY for d in deps) or any(
                    d in heavy for d in deps if d in mods and d != name):
                heavy.add(name)
                changed = True
    return heavy


def violations():
    """[(module, line, imported)] function-local imports that keep nothing light."""
    mods = scan()
    heavy = heavy_modules(mods)
    out = []
    for name, (_, local) in sorted(mods.items()):
        for line, mod, names in local:
            subs = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in mods]
            for target in subs or [mod]:
                if name in heavy or target not in heavy:
                    out.append((name, line, target))
    return out


if __name__ == "__main__":
    bad = violations()
    for m, line, t in bad:
        print(f"{m}:{line}: local import of {t}")
    print(f"{len(bad)} function-local import(s) that keep nothing light")
    sys.exit(1 if bad else 0)
