"""report.html and diff.html without a browser: what analyse / report / diff write, that the
page is self-contained, that analyse and `report OUT_DIR` build the same page, that sections
whose file is absent say so, and that the fast reader of cluster_communication.json's 'Total Op
Info' members equals a plain parse of the whole file (the browser tests are in
test_html_browser.py)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascendprof.cli.main import main
from ascendprof.report.html import data as D
from conftest import QWEN3, SHARED


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def q3(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "q3"
    r = _cli("analyse", QWEN3, "-o", out, "-q", "--no-cache")
    assert r.exit_code == 0, r.output
    return out


def test_analyse_writes_a_self_contained_page(q3):
    page = (q3 / "report.html").read_text(encoding="utf-8")
    assert 'name="generator" content="ascendprof' in page
    # nothing is fetched when the page is viewed: no external script, style or image
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="(https?:)?//', page)
    assert "<script src=" not in page and "<link " not in page
    assert len(page.encode()) < 5 * 1024 * 1024
    for sid in ("diagnosis", "steps", "pipeline", "communication", "operators", "memory",
                "problems"):
        assert f'<section id="{sid}"' in page
    summary = json.loads((q3 / "summary.json").read_text())
    assert str(q3 / "report.html") in summary["outputs"]


def test_report_command_rebuilds_the_same_page(q3, tmp_path):
    import subprocess
    import sys

    first = (q3 / "report.html").read_text(encoding="utf-8")
    dest = tmp_path / "again.html"
    r = subprocess.run([sys.executable, "-m", "ascendprof", "report", str(q3), "-o", str(dest)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"HTML report: {dest} (open it in a browser; no network needed)"
    # byte for byte: built from the same files, in another process, to another place
    assert dest.read_text(encoding="utf-8") == first


def test_page_written_piece_by_piece_is_the_page_rendered_whole(q3):
    """analyse writes report.html piece by piece, each chart's spec encoded as it is written:
    the same bytes as the template rendered whole with every spec in one json.dumps of
    {name: spec} (made safe inside <script> the same way)."""
    from ascendprof.report.html import diagnosis, page as P

    d = D.load(q3)
    sections = P.build_sections(d)
    specs = {c.name: c.spec() for s in sections for b in s.blocks if b.kind == "chart"
             for c in b.model.charts()}
    assert len(specs) > 5
    whole = json.dumps(specs, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    whole = whole.replace("</", "<\\/").replace("<!--", "<\\!--")
    assert P._specs(sections) == whole
    root = (d.summary or {}).get("root") or str(q3)
    page = P._env().get_template("report.html.j2").render(
        sections=sections, version=P.__version__, title=f"ascendprof report: {root}",
        chart_specs=whole, echarts_js=P._static("echarts.min.js"),
        charts_js=P._static("charts.js"), root=root, headline=diagnosis.headline_html(d))
    assert (q3 / "report.html").read_text(encoding="utf-8") == page


def test_no_html_removes_our_page_but_not_a_foreign_one(tmp_path):
    out = tmp_path / "o"
    assert _cli("analyse", QWEN3, "-o", out, "-q").exit_code == 0
    assert (out / "report.html").is_file()
    r = _cli("analyse", QWEN3, "-o", out, "-q", "--no-html")
    assert r.exit_code == 0 and "HTML report" not in r.output
    assert not (out / "report.html").exists()
    # a page ascendprof did not write is never replaced: neither by analyse nor by report
    (out / "report.html").write_text("<html>the user's own page</html>")
    r = _cli("analyse", QWEN3, "-o", out, "-q")
    assert r.exit_code == 2 and "report.html exists and ascendprof did not write it" in r.output
    r = _cli("report", out)
    assert r.exit_code == 2 and "ascendprof did not write it" in r.output
    assert (out / "report.html").read_text() == "<html>the user's own page</html>"


def test_report_page_becomes_an_output_of_the_analysis(tmp_path):
    """`report OUT` after `analyse --no-html`: the page joins the manifest, so the next analyse
    replaces it (and --no-html removes it) instead of refusing it as foreign."""
    out = tmp_path / "o"
    assert _cli("analyse", QWEN3, "-o", out, "-q", "--no-html").exit_code == 0
    assert _cli("report", out).exit_code == 0
    manifest = json.loads((out / ".ascendprof-manifest.json").read_text())
    assert "report.html" in manifest["files"]
    assert _cli("analyse", QWEN3, "-o", out, "-q").exit_code == 0
    assert _cli("analyse", QWEN3, "-o", out, "-q", "--no-html").exit_code == 0
    assert not (out / "report.html").exists()


def test_cached_rerun_keeps_the_page(tmp_path):
    out = tmp_path / "o"
    assert _cli("analyse", QWEN3, "-o", out, "-q").exit_code == 0
    (out / "report.html").unlink()  # the cache entry still holds it
    r = _cli("analyse", QWEN3, "-o", out, "-q")
    assert r.exit_code == 0 and f"HTML report: {out / 'report.html'}" in r.output
    assert 'content="ascendprof' in (out / "report.html").read_text(encoding="utf-8")


def test_sections_without_their_file_say_so(q3, tmp_path):
    """An output holding only the step breakdown: every other section says it is not in this
    analysis instead of failing or drawing empty charts."""
    out = tmp_path / "partial"
    out.mkdir()
    shutil.copy(q3 / "cluster_step_trace_time.csv", out)
    r = _cli("report", out)
    assert r.exit_code == 0, r.output
    page = (out / "report.html").read_text(encoding="utf-8")
    for sid in ("pipeline", "communication", "operators", "memory", "problems"):
        sec = page[page.index(f'<section id="{sid}"'):]
        sec = sec[:sec.index("</section>")]
        assert "Not in this analysis" in sec, sid
    assert 'data-chart="steps_bars"' in page


def test_report_refuses_a_directory_that_is_no_analysis(tmp_path):
    r = _cli("report", tmp_path)
    assert r.exit_code == 2
    assert "not an ascendprof analyse output" in r.output
    assert "Traceback" not in r.output


def test_report_names_a_broken_file(q3, tmp_path):
    out = tmp_path / "broken"
    shutil.copytree(q3, out, ignore=shutil.ignore_patterns("tables", ".ascendprof-cache"))
    (out / "verdicts.json").write_text("{not json")
    r = _cli("report", out)
    assert r.exit_code == 2, r.output
    assert "verdicts.json" in r.output and "Traceback" not in r.output


def _totals_by_full_parse(path: Path) -> set:
    doc = json.loads(path.read_text())
    rows = set()
    for steps in doc.values():
        for step, ops in steps.items():
            for op, ranks in ops.items():
                if op.startswith("Total Op Info@"):
                    for rank, info in ranks.items():
                        t = info["Communication Time Info"]
                        rows.add((op.split("@", 1)[1], step, int(rank), t["Elapse Time(ms)"],
                                  t["Transit Time(ms)"], t["Wait Time(ms)"],
                                  t["Synchronization Time(ms)"], t["Idle Time(ms)"]))
    return rows


def _totals_by_reader(path: Path) -> set:
    df = D.communication_totals(path)
    return {(g, s, r, *v) for g, s, r, *v in df[["Group Id", "Step", "Rank"]
                                                + D.TOTAL_COLUMNS[4:]].itertuples(index=False)}


def test_total_op_info_reader_equals_a_full_parse(q3, tmp_path):
    path = q3 / "cluster_communication.json"
    want = _totals_by_full_parse(path)
    assert len(want) == 24  # 4 ranks in 10 groups (two single-rank tp groups)
    assert _totals_by_reader(path) == want
    # the same content indented (as msprof-analyze writes it), with a second step whose
    # values differ: every member is found, and under its own step
    doc = json.loads(path.read_text())
    for g in doc.values():
        (key, ops), = g.items()
        second = json.loads(json.dumps(ops))
        for op, ranks in second.items():
            for info in ranks.values():
                info["Communication Time Info"]["Elapse Time(ms)"] += 1000.0
        g["step14"] = second
    other = tmp_path / "cluster_communication.json"
    other.write_text(json.dumps(doc, indent=4))
    want2 = _totals_by_full_parse(other)
    assert len(want2) == 48
    assert _totals_by_reader(other) == want2


@pytest.mark.parametrize("chunk,tail", [(7, 64), (1000, 64), (4096, 600)])
def test_total_op_info_reader_reads_in_chunks(q3, tmp_path, monkeypatch, chunk, tail):
    """The file is read a chunk at a time: a key, a step key, a member or a multi-byte
    character cut by a chunk's end gives the same rows, in the same order, as one read."""
    from ascendprof.report import readback
    doc = json.loads((q3 / "cluster_communication.json").read_text())
    for g in doc.values():  # a second step, and a non-ASCII text inside the records
        (key, ops), = g.items()
        second = json.loads(json.dumps(ops))
        for op, ranks in second.items():
            for info in ranks.values():
                info["Communication Time Info"]["Elapse Time(ms)"] += 1000.0
                info["note"] = "é€𝄞" * 3
        g["step14"] = second
    path = tmp_path / "cluster_communication.json"
    path.write_text(json.dumps(doc, indent=4, ensure_ascii=False), encoding="utf-8")
    whole = D.communication_totals(path)
    assert {(g, s, r, *v) for g, s, r, *v in whole[["Group Id", "Step", "Rank"]
                                                  + D.TOTAL_COLUMNS[4:]].itertuples(
        index=False)} == _totals_by_full_parse(path)
    monkeypatch.setattr(readback, "TOTALS_CHUNK", chunk)
    monkeypatch.setattr(readback, "_TOTALS_TAIL", tail)
    assert D.communication_totals(path).equals(whole)


def test_matrix_links_are_the_files_values(q3):
    doc = json.loads((q3 / "cluster_communication_matrix.json").read_text())
    df = D.load(q3).links
    n = sum(len(v) for g in doc.values() for ops in g.values() for k, v in ops.items()
            if k.startswith("Total Op Info@"))
    assert len(df) == n == 51
    row = df[(df["Src Rank"] == 0) & (df["Dst Rank"] == 1)].iloc[0]
    # from the file: "(0, 1)" step13 "Total Op Info@5862276114690318097" "0-1"
    assert row["Group"] == "dp_cp" and row["Transport Type"] == "HCCS"
    assert row["Bandwidth(GB/s)"] == 18.9444 and row["Transit Size(MB)"] == 1127.44704


@pytest.mark.parametrize("chunk,tail", [(1 << 23, 1 << 20), (700, 300), (97, 41)])
def test_matrix_links_read_as_a_stream_equal_the_whole_file_parsed(q3, monkeypatch, chunk, tail):
    from ascendprof.report import readback
    # the page decodes only the 'Total Op Info' members of cluster_communication_matrix.json,
    # reading it a piece at a time: the same rows as parsing the whole file, also when a piece
    # ends inside a key or a member (small pieces)
    path = q3 / "cluster_communication_matrix.json"
    whole = readback.matrix_links(json.loads(path.read_text()))
    monkeypatch.setattr(readback, "TOTALS_CHUNK", chunk)
    monkeypatch.setattr(readback, "_TOTALS_TAIL", tail)
    got = readback.matrix_links_file(path)
    assert len(got) == 51 and got.equals(whole)


@pytest.mark.skipif(SHARED is None, reason="../shared/data not present")
def test_diff_html(tmp_path):
    lv = SHARED / "torch_npu-2rank-levels" / "text"
    r = _cli("diff", lv / "level1", lv / "level2", "-o", tmp_path / "d", "--html")
    assert r.exit_code == 0, r.output
    page = (tmp_path / "d" / "diff.html").read_text(encoding="utf-8")
    assert f"HTML diff: {tmp_path / 'd' / 'diff.html'}" in r.output
    assert "<script src=" not in page
    # the step table in the page is diff -o's steps.csv, value for value
    import csv

    with open(tmp_path / "d" / "steps.csv", newline="") as f:
        header, *rows = list(csv.reader(f))
    body = page[page.index('class="numbers diff-steps"'):]
    body = body[:body.index("</table>")]
    assert re.findall(r"<th>([^<]*)</th>", body) == header
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", body)
    n = len(header)
    assert len(cells) == n * len(rows) and rows
    for i, row in enumerate(rows):
        got = cells[n * i:n * i + n]
        assert got[:2] == row[:2]  # scope, metric
        for g, w in zip(got[2:], row[2:]):
            assert (g == w == "") or float(g) == float(w)
    r = _cli("diff", QWEN3, "--ranks", "0,2", "--html", tmp_path / "r.html", "--format", "json")
    assert r.exit_code == 0
    json.loads(r.stdout)  # stdout stays JSON; the page's line goes to stderr
    assert (tmp_path / "r.html").is_file()


def _copy_outputs(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("tables", ".ascendprof-cache",
                                                             "report.html"))
    return dest


def _models(out: Path) -> dict:
    """name -> chart block (Chart, Tabs, RankPick) and name -> Chart of every chart inside."""
    from ascendprof.report.html.page import build_sections

    secs = build_sections(D.load(out))
    roots = [b.model for s in secs for b in s.blocks if b.kind == "chart"]
    out = {m.name: m for m in roots}
    out.update({c.name: c for m in roots for c in m.charts()})
    return out


def test_several_steps_get_one_tab_each(q3, tmp_path):
    import csv

    out = _copy_outputs(q3, tmp_path / "two")
    path = out / "cluster_step_trace_time.csv"
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    extra = [[("14" if i == 0 else v) for i, v in enumerate(r)] for r in rows[1:]]
    with open(path, "a", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(extra)
    m = _models(out)
    assert "steps_bars" in m and type(m["steps_bars"]).__name__ == "Tabs"
    assert [t for t, _ in m["steps_bars"].panels] == ["step 13", "step 14"]
    assert sorted(m["steps_bars_1"].data["rank"]) == [0, 1, 2, 3]


def test_big_cluster_aggregates(q3, tmp_path):
    """128 ranks (the Qwen3 rows repeated, 8 devices a node): heatmaps by node hold every
    rank, the bar chart only the 16 longest-computing ranks of each stage, no bar per rank."""
    import csv

    out = tmp_path / "big"
    out.mkdir()
    with open(q3 / "cluster_step_trace_time.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    ranks = [r for r in rows if r["Type"] == "rank"]
    computing = {}
    with open(out / "cluster_step_trace_time.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for n in range(128):
            r = dict(ranks[n % 4], Index=str(n), **{"PP Index": str(n // 64)})
            r["Computing"] = str(float(r["Computing"]) + n)  # rank n computes n µs longer
            computing[n] = float(r["Computing"])
            w.writerow(r)
    longest = [n for stage in (range(64), range(64, 128))
               for n in sorted(stage, key=computing.get, reverse=True)[:16]]
    (out / "summary.json").write_text(json.dumps({"root": "x", "sources": [
        {"rank": n, "device_id": n % 8, "kind": "torch_npu text"} for n in range(128)]}))
    m = _models(out)
    assert "steps_bars" not in m
    heat = m["steps_heatmaps"].panels[0][1][0].data
    assert sorted(heat["rank"]) == list(range(128))
    assert max(heat["node"]) == 15 and max(heat["slot"]) == 7
    top = m["steps_top"].data
    assert sorted(top["rank"]) == sorted(longest)


def test_environment_turns_the_page_off_and_the_option_back_on(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCENDPROF_HTML", "0")
    assert _cli("analyse", QWEN3, "-o", tmp_path / "off", "-q").exit_code == 0
    assert not (tmp_path / "off" / "report.html").exists()
    assert (tmp_path / "off" / "verdicts.json").is_file()
    assert _cli("analyse", QWEN3, "-o", tmp_path / "on", "-q", "--html").exit_code == 0
    assert (tmp_path / "on" / "report.html").is_file()
    monkeypatch.delenv("ASCENDPROF_HTML")
    assert _cli("analyse", QWEN3, "-o", tmp_path / "default", "-q").exit_code == 0
    assert (tmp_path / "default" / "report.html").is_file()


def test_expert_load_section(tmp_path, q3):
    """The Expert load section shows moe_expert_load.csv: absent on Qwen3 (no GroupedMatmul),
    drawn on a copy whose ranks 0 and 2 get GroupedMatmul ops (8192 and 16384 tokens per step,
    as in test_moe.py: load over the group mean 0.6667 and 1.3333)."""
    import test_moe as M

    page = (q3 / "report.html").read_text()
    sec = page[page.index('id="moe"'):]
    assert "Not in this analysis" in sec[:2000] and "no moe_expert_load.csv" in sec[:2000]
    root = M._cluster(tmp_path, [2048] * 4, [4096] * 4)
    out = tmp_path / "out"
    assert _cli("analyse", root, "-o", out, "-q", "--no-cache").exit_code == 0
    page = (out / "report.html").read_text()
    sec = page[page.index('id="moe"'):]
    assert "Not in this analysis" not in sec[:2000]
    assert "moe_load" in page  # the chart's model
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", sec[:sec.index("</table>")])
    assert "1.3333" in cells and "0.6667" in cells
