"""report.html in a real browser: Debian's headless Chromium driven by Playwright, networking
off. For the Qwen3 sample and the 2-rank torch_npu levels: no console errors, every chart drawn
(a canvas in each chart), and the numbers in the page (the numbers tables and the charts' own
data, window.ASCENDPROF.specs) equal those of cluster_step_trace_time.csv and
cluster_communication_matrix.json, read here with the csv / json modules. The first screen
(1400x900) holds the headline and the first verdict, for the sample and a 256-rank cluster.

Chromium comes from Debian (`apt-get install chromium`, as .ci/run does); Playwright only
drives it (no browser download). Without it the tests skip, except under CI=true, where they
fail: a CI that cannot run them must not pass silently.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main
from ascendprof.report.html.common import MAX_TABLE_ROWS
from conftest import QWEN3, SHARED

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic",
                 "--disable-default-apps", "--disable-extensions"]


def _chromium() -> str | None:
    for c in (os.environ.get("ASCENDPROF_CHROMIUM"), "/usr/bin/chromium",
              shutil.which("chromium"), shutil.which("chromium-browser")):
        if c and Path(c).is_file():
            return c
    return None


def _unavailable(why: str):
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser test cannot run under CI: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    if exe is None:
        _unavailable("no Chromium (apt-get install chromium, or set ASCENDPROF_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("python playwright is not installed (pip install playwright)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Page:
    """A page opened offline; every request other than the file itself is aborted and kept."""

    def __init__(self, browser, path: Path, width: int = 1280):
        self.ctx = browser.new_context(offline=True, viewport={"width": width, "height": 900})
        self.requests: list[str] = []
        self.console: list[tuple[str, str]] = []

        def route(r):
            url = r.request.url
            if url.startswith("file:"):
                r.continue_()
            else:
                self.requests.append(url)
                r.abort()

        self.ctx.route("**/*", route)
        self.page = self.ctx.new_page()
        self.page.on("console", lambda m: self.console.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.console.append(("pageerror", str(e))))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_function("window.ASCENDPROF && window.ASCENDPROF.ready",
                                    timeout=60_000)

    def data(self, name: str) -> dict:
        """The data of a named chart, as the page holds it (its columns)."""
        return self.page.evaluate("(name) => window.ASCENDPROF.specs[name].data", name)

    def names(self) -> list[str]:
        return self.page.evaluate("() => Object.keys(window.ASCENDPROF.specs)")

    def table(self, css: str) -> tuple[list[str], list[dict], list[list[str]]]:
        """Header, row data-* attributes and cell texts of the numbers table ``css``."""
        return self.page.evaluate(
            """(css) => {
                const t = document.querySelector(`details.${css} table`);
                const head = [...t.querySelectorAll('thead th')].map(e => e.textContent);
                const rows = [...t.querySelectorAll('tbody tr')];
                return [head, rows.map(r => ({...r.dataset})),
                        rows.map(r => [...r.querySelectorAll('td')].map(e => e.textContent))];
            }""", css)

    def close(self):
        self.ctx.close()


def _analyse(src: Path, out: Path, *extra: str) -> Path:
    r = CliRunner().invoke(main, ["analyse", str(src), "-o", str(out), "-q", "--no-cache",
                                  *extra])
    assert r.exit_code == 0, r.output
    assert f"HTML report: {out / 'report.html'}" in r.output
    return out


@pytest.fixture(scope="module")
def qwen3_out(tmp_path_factory):
    return _analyse(QWEN3, tmp_path_factory.mktemp("html") / "qwen3")


@pytest.fixture(scope="module")
def levels_out(tmp_path_factory):
    if SHARED is None:
        _unavailable("../shared/data not present")
    # the whole tree holds six runs (text and db, three levels): the text level2 run picked
    return _analyse(SHARED / "torch_npu-2rank-levels", tmp_path_factory.mktemp("html") / "lv",
                    "--run", "text/level2")


@pytest.fixture(scope="module")
def level0_out(tmp_path_factory):
    if SHARED is None:
        _unavailable("../shared/data not present")
    return _analyse(SHARED / "torch_npu-2rank-levels" / "text" / "level0",
                    tmp_path_factory.mktemp("html") / "lv0")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _check_clean_and_drawn(pg: Page) -> None:
    errors = [m for m in pg.console if m[0] in ("error", "pageerror")]
    assert not errors, errors
    assert not pg.requests, f"the page asked the network for {pg.requests}"
    charts = pg.page.locator("div.chart")
    assert charts.count() > 0
    for el in charts.all():
        name = el.get_attribute("data-chart")
        el.scroll_into_view_if_needed()
        assert el.locator("canvas").count(), f"chart {name} drew nothing"
        box = el.locator("canvas").first.bounding_box()
        assert box and box["width"] > 50 and box["height"] > 50, (name, box)


def _check_step_numbers(pg: Page, out: Path) -> None:
    with open(out / "cluster_step_trace_time.csv", newline="") as f:
        want = list(csv.DictReader(f))
    head, keys, cells = pg.table("steps")
    assert len(cells) == len(want)
    by_key = {(r["Step"], r["Type"], r["Index"]): r for r in want}
    for k, row in zip(keys, cells):
        expect = by_key[(k["step"], k["type"], k["index"])]
        for col, text in zip(head, row):
            v = expect[col]
            if v in ("", "NA") or not v.replace(".", "").replace("-", "").isdigit():
                assert text in (v, "") or (v == "NA" and text == ""), (col, text, v)
            else:
                assert _close(float(text), float(v)), (col, text, v)
    # the bars: the chart's own data, in ms, against the CSV's µs
    ranks = [r for r in want if r["Type"] == "rank"]
    name = "steps_bars" if "steps_bars" in pg.names() else "steps_bars_0"
    d = pg.data(name)
    assert sorted(d["rank"]) == sorted(int(r["Index"]) for r in ranks)
    for rank, comp, comm, free, prep in zip(d["rank"], d["comp"], d["comm"], d["free"],
                                            d["prep"]):
        r = next(x for x in ranks if int(x["Index"]) == rank)
        assert _close(comp, float(r["Computing"]) / 1000)
        assert _close(comm, float(r["Communication(Not Overlapped)"]) / 1000)
        assert _close(free, float(r["Free"]) / 1000)
        assert _close(prep, float(r["Preparing"]) / 1000)


def _matrix_links(out: Path) -> dict:
    """{(group id, step, src, dst): link} of every group's 'Total Op Info' in the file."""
    doc = json.loads((out / "cluster_communication_matrix.json").read_text())
    links = {}
    for steps in doc.values():
        for step, ops in steps.items():
            for op, ls in ops.items():
                if op.startswith("Total Op Info@"):
                    for k, v in ls.items():
                        s, t = k.split("-")
                        links[(op.split("@", 1)[1], step, int(s), int(t))] = v
    return links


def _check_matrix_numbers(pg: Page, out: Path) -> None:
    want = _matrix_links(out)
    assert want
    head, keys, cells = pg.table("links")
    assert len(cells) == min(len(want), MAX_TABLE_ROWS)
    for k, row in zip(keys, cells):
        link = want[(k["groupId"], k["step"], int(k["src"]), int(k["dst"]))]
        got = dict(zip(head, row))
        assert got["Transport Type"] == link["Transport Type"]
        for col in ("Bandwidth(GB/s)", "Transit Time(ms)", "Transit Size(MB)"):
            assert _close(float(got[col]), float(link[col])), (k, col)
    # the heatmaps' own data: every non-self link of the file, with its values
    drawn = pg.page.evaluate("""() => {
        const out = [];
        for (const [name, spec] of Object.entries(window.ASCENDPROF.specs)) {
            if (!name.startsWith('comm_heat_')) continue;
            const d = spec.data;
            d.src.forEach((x, i) => out.push([d.gid[i], d.step[i], Number(x), Number(d.dst[i]),
                                              d.bw[i], d.time[i], d.size[i]]));
        }
        return out; }""")
    non_self = {k: v for k, v in want.items() if k[2] != k[3]}
    assert len(drawn) == 3 * len(non_self)  # bandwidth, transit time and size heatmaps
    assert {tuple(x[:4]) for x in drawn} == set(non_self)
    for g, st, s, t, bw, tm, sz in drawn:
        v = non_self[(g, st, s, t)]
        assert _close(bw, v["Bandwidth(GB/s)"]) and _close(tm, v["Transit Time(ms)"])
        assert _close(sz, v["Transit Size(MB)"])


def test_qwen3_report_in_chromium(browser, qwen3_out):
    pg = Page(browser, qwen3_out / "report.html")
    try:
        _check_clean_and_drawn(pg)
        _check_step_numbers(pg, qwen3_out)
        _check_matrix_numbers(pg, qwen3_out)
        text = pg.page.inner_text("#pipeline")
        assert "Not in this analysis" not in text
        # the flagged ranks: every rank a verdict names carries the marker
        vs = json.loads((qwen3_out / "verdicts.json").read_text())["verdicts"]
        named = {r for v in vs if v["severity"] != "info" for r in v["ranks"]}
        d = pg.data("steps_bars")
        assert {r for r, f in zip(d["rank"], d["flagged"]) if f is not None} == named
    finally:
        pg.close()


def test_qwen3_rank_selection_filters_operators(browser, qwen3_out):
    """Choosing rank 0 shows its op types (op_statistics.csv's rows of rank 0) and only the
    kernels it ran; clicking the bar of rank 2 in the step breakdown selects rank 2."""
    with open(qwen3_out / "top_kernels.csv", newline="") as f:
        kernels = list(csv.DictReader(f))
    only2 = [k for k in kernels if "0" not in k["Ranks"].split(",")]
    assert only2, "the fixture has kernels only rank 2 ran"
    with open(qwen3_out / "op_statistics.csv", newline="") as f:
        types0 = {r["OP Type"] for r in csv.DictReader(f) if r["Rank"] == "0"}
    pg = Page(browser, qwen3_out / "report.html")
    try:
        sel = pg.page.locator("div.chart[data-chart=ops_rank] select")
        sel.select_option("0")
        pg.page.wait_for_timeout(300)
        rows = pg.page.locator("table.by-rank tbody tr:not([hidden])").count()
        assert rows == len(kernels) - len(only2)
        shown = pg.page.evaluate("""() => window.ASCENDPROF.charts['ops_rank_bars']
                                        .getOption().yAxis[0].data""")
        assert shown and set(shown) <= types0
        # a real click on the middle of rank 2's Computing bar
        pg.page.locator("#steps").scroll_into_view_if_needed()
        x, y = pg.page.evaluate("""() => {
            const c = window.ASCENDPROF.charts['steps_bars'];
            const d = window.ASCENDPROF.specs['steps_bars'].data;
            const i = d.rank.indexOf(2);
            const p = c.convertToPixel({seriesIndex: 0}, [i, d.comp[i] / 2]);
            const box = c.getDom().getBoundingClientRect();
            return [box.left + p[0], box.top + p[1]]; }""")
        pg.page.mouse.click(x, y)
        pg.page.wait_for_timeout(200)
        assert sel.input_value() == "2"
    finally:
        pg.close()


def test_levels_report_in_chromium(browser, levels_out):
    pg = Page(browser, levels_out / "report.html")
    try:
        _check_clean_and_drawn(pg)
        _check_step_numbers(pg, levels_out)
        _check_matrix_numbers(pg, levels_out)
        # every problem of problems.csv is listed
        with open(levels_out / "problems.csv", newline="") as f:
            problems = list(csv.DictReader(f))
        assert problems
        _, _, cells = pg.table("problems")
        assert [c[4] for c in cells] == [p["Reason"] for p in problems]
        assert "Not in this analysis" in pg.page.inner_text("#pipeline")  # PP = 1
    finally:
        pg.close()


def test_level0_report_says_what_is_not_there(browser, level0_out):
    assert not (level0_out / "cluster_communication_matrix.json").exists()
    pg = Page(browser, level0_out / "report.html")
    try:
        _check_clean_and_drawn(pg)
        _check_step_numbers(pg, level0_out)
        comm = pg.page.inner_text("#communication")
        assert "Not in this analysis" in comm and "Level0" in comm
    finally:
        pg.close()


def _first_screen(pg: Page) -> None:
    """The headline and the first verdict card are inside the first 1400x900 screen."""
    for css in ("section.headline", "#diagnosis .verdict"):
        box = pg.page.locator(css).first.bounding_box()
        assert box and box["y"] >= 0 and box["y"] + min(box["height"], 120) <= 900, (css, box)
    head = pg.page.inner_text("section.headline")
    assert head.startswith("Step time ") and "Computing" in head and "Free" in head


def test_first_screen_holds_the_answer(browser, qwen3_out):
    pg = Page(browser, qwen3_out / "report.html", width=1400)
    try:
        _first_screen(pg)
        summary = json.loads((qwen3_out / "summary.json").read_text())
        assert f"Step time {summary['headline']['step_ms']:,.1f} ms" in pg.page.inner_text(
            "section.headline")
        # the reconciliation of the verdict's wait with cluster_communication.json's pp ops
        rec = pg.page.locator("details.reconcile tbody tr").all()
        assert rec
        doc = json.loads((qwen3_out / "cluster_communication.json").read_text())
        groups = json.loads((qwen3_out / "communication_group.json").read_text())
        del groups
        for tr in rec:
            cells = [c.inner_text() for c in tr.locator("td").all()]
            rank, wait, elapse, transit, pwait, idle, both = cells
            assert abs(float(elapse.replace(",", "")) - sum(
                float(x.replace(",", "")) for x in (transit, pwait, idle))) < 0.15
            assert float(both.replace(",", "")) == pytest.approx(
                float(pwait.replace(",", "")) + float(idle.replace(",", "")), abs=0.15)
        assert doc
    finally:
        pg.close()


@pytest.fixture(scope="module")
def big_out(tmp_path_factory, generated_cluster):
    root = generated_cluster(256, "--kernels-per-rank", "20", "--comm-ops-per-rank", "10")
    return _analyse(root, tmp_path_factory.mktemp("html") / "c256")


def test_256_ranks_first_screen_and_clean(browser, big_out):
    page = big_out / "report.html"
    assert page.stat().st_size < 5_000_000
    pg = Page(browser, page, width=1400)
    try:
        _first_screen(pg)
        errors = [m for m in pg.console if m[0] in ("error", "pageerror")]
        assert not errors and not pg.requests
    finally:
        pg.close()
