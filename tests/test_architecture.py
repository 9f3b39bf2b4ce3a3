"""The architecture holds (docs/architecture.md): every import points down and no two modules of
one package import each other in a cycle, function-local imports included (import-linter's
contracts in pyproject.toml); a function-local import of an ascendprof module is kept only
where it keeps a light path light (tools/lazy_imports.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which(
        "lint-imports")
    assert lint, "import-linter is part of the test extra: pip install -e '.[test]'"
    r = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "2 kept, 0 broken" in r.stdout, r.stdout[-2000:]


def test_function_local_imports_keep_a_light_path_light():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import lazy_imports
    finally:
        sys.path.pop(0)
    bad = lazy_imports.violations()
    assert not bad, "\n".join(f"{m}:{line}: local import of {t}" for m, line, t in bad)


def test_the_lazy_rule_sees_heavy_modules():
    """The check itself: a module importing pyarrow at its top is heavy, the light paths'
    modules are not (so the rule above can fail)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import lazy_imports
    finally:
        sys.path.pop(0)
    heavy = lazy_imports.heavy_modules(lazy_imports.scan())
    assert {"ascendprof.model.schemas", "ascendprof.engine.pipeline"} <= heavy
    assert not {"ascendprof", "ascendprof.engine.run", "ascendprof.engine.cache",
                "ascendprof.scan", "ascendprof.report.headline"} & heavy


@pytest.mark.parametrize("module", ["ascendprof", "ascendprof.cli.main", "ascendprof.engine.run"])
def test_light_modules_import_neither_arrow_nor_pandas(module):
    code = (f"import sys, {module}\n"
            "print(sorted(m for m in ('pyarrow', 'pandas', 'bokeh') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


def test_mutation_modules_exist():
    """`make mutants` measures the modules of mutation/modules.toml with the test files listed
    there: a module moved or folded away (or a test file renamed) must be updated in it, or the
    run stops on the missing path."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    spec = tomllib.loads((ROOT / "mutation" / "modules.toml").read_text(encoding="utf-8"))
    modules = spec["module"]
    assert len(modules) >= 30
    for name, m in modules.items():
        assert (ROOT / m["path"]).is_file(), (name, m["path"])
        assert m["tests"] and all((ROOT / t).is_file() for t in m["tests"]), (name, m["tests"])
