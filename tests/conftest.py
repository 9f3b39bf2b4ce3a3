"""Shared test locations. Real data comes from fixtures/ (shipped) or ../shared/data (beside the
checkout in development and CI); tests that need the latter skip with a reason naming the shared
data when it is absent. Under CI (``CI=true``) a missing shared data directory, or any such skip,
is a failure; elsewhere the run ends with one line counting those skips."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# No hypothesis test here is about speed (those are benchmarks): no per-example deadline, which
# a loaded machine (2 cores shared by several jobs) would turn into false failures.
settings.register_profile("ascendprof", deadline=None)
settings.load_profile("ascendprof")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
QWEN3 = FIXTURES / "qwen3-4rank-pp2dp2"


def _shared() -> Path | None:
    env = os.environ.get("ASCENDPROF_SHARED_DATA")
    if env:  # an explicit location is the only one tried (set it to a missing path to test without)
        return Path(env) if Path(env).is_dir() else None
    for cand in (ROOT.parent / "shared" / "data", ROOT.parent.parent / "shared" / "data"):
        if cand.is_dir():
            return cand
    return None


SHARED = _shared()
#: Text every skip for want of the shared data carries (counted by the summary line below).
SHARED_MISSING = "../shared/data not present (set ASCENDPROF_SHARED_DATA)"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def _for_want_of_shared_data(report) -> bool:
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return False
    return "shared" in str(report.longrepr[2]).lower()


def pytest_sessionstart(session):
    if _in_ci() and SHARED is None:
        pytest.exit("CI=true but the shared data is missing: expected ../shared/data beside the "
                    "checkout or ASCENDPROF_SHARED_DATA; the tests on real data would be skipped",
                    returncode=1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and _for_want_of_shared_data(report):  # under CI a skip for want of data fails
        report.outcome = "failed"
        report.longrepr = f"CI=true and this test was skipped: {report.longrepr[2]}"


def pytest_terminal_summary(terminalreporter):
    skipped = terminalreporter.stats.get("skipped", [])
    shared = sum(_for_want_of_shared_data(r) for r in skipped)
    if shared:
        terminalreporter.write_line(
            f"{shared} of {len(skipped)} skipped test(s) need the real profiling data in "
            f"../shared/data, which is not beside this checkout (or set ASCENDPROF_SHARED_DATA)",
            yellow=True)


@pytest.fixture
def shared_data() -> Path:
    if SHARED is None:
        pytest.skip(SHARED_MISSING)
    return SHARED


@pytest.fixture
def qwen3() -> Path:
    return QWEN3


def load_make_cluster():
    """benchmarks/make_cluster.py as a module (it is a script, not part of the package)."""
    import importlib.util
    import sys

    if "make_cluster" in sys.modules:
        return sys.modules["make_cluster"]
    spec = importlib.util.spec_from_file_location("make_cluster",
                                                  ROOT / "benchmarks" / "make_cluster.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_cluster"] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def generated_cluster(tmp_path_factory):
    """``make(n, *args)`` -> an n-rank cluster cloned from the real ranks by make_cluster.py
    (built once per argument set; the Qwen3 template comes from fixtures/ when ../shared/data is
    absent); skips when the template's ranks are in neither."""
    built = {}

    def make(n: int, *args: str) -> Path:
        key = (n, *args)
        if key not in built:
            mc = load_make_cluster()
            template = args[args.index("--template") + 1] if "--template" in args else "qwen3"
            try:
                mc.shared_data_dir(template)
            except SystemExit:
                pytest.skip(SHARED_MISSING)
            out = tmp_path_factory.mktemp("generated") / f"c{n}"
            mc.main([str(n), str(out), *args])
            built[key] = out
        return built[key]

    return make


@pytest.fixture(autouse=True)
def _no_thread_left_behind():
    """A test must not leave threads running: later tests (EarlyWrite forks only in a
    single-threaded process) would then behave by the order the tests ran in."""
    import threading
    import time

    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5  # threads told to stop get a moment to do so
    while True:
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not left, f"test left threads running: {[t.name for t in left]}"


@pytest.fixture(scope="module", autouse=True)
def _html_page_only_where_tested(request):
    """analyse writes report.html by default (a few tenths of a second); the suite runs analyse hundreds of times, so the page is off ($ASCENDPROF_HTML=0, also in the
    commands the tests start) except in the modules that test it (test_html_*)."""
    mp = pytest.MonkeyPatch()
    on = request.module.__name__.rsplit(".", 1)[-1].startswith("test_html")
    mp.setenv("ASCENDPROF_HTML", "1" if on else "0")
    yield
    mp.undo()


def analysis_of(root, workers=None):
    """The whole cluster analysis of ``root`` in memory, through the path users take
    (``ascendprof.open(root).analysis()``: the same engine and analyses as ``analyse``)."""
    import ascendprof

    return ascendprof.open(root, workers=workers).analysis()


def analyse_quietly(src, out):
    """``ascendprof analyse SRC -o OUT --quiet --no-cache --workers 1`` through the CLI; an
    uncaught exception (not an exit code) fails the test with the output."""
    from click.testing import CliRunner

    from ascendprof.cli.main import main

    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "--quiet", "--no-cache",
                                  "--workers", "1"])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"uncaught {type(r.exception).__name__}: {r.exception}\n{r.output}")
    return r


def csv_rows(path):
    """The rows of a CSV output as dicts (a BOM, if any, dropped)."""
    import csv

    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))
