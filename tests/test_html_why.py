"""The Why section of report.html: the tables of idle_breakdown.csv, late_arrivals.csv,
op_efficiency.csv and the communication-against-hardware files on the Qwen3 sample, what could
not be seen said in words, and "not in this analysis" without the files."""

from __future__ import annotations

import re
import shutil

from click.testing import CliRunner

from ascendprof.cli.main import main
from conftest import QWEN3


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_why_section(tmp_path):
    out = tmp_path / "q3"
    r = _cli("analyse", QWEN3, "-o", out, "-q", "--no-cache")
    assert r.exit_code == 0, r.output
    page = (out / "report.html").read_text(encoding="utf-8")
    sec = page[page.index('<section id="why"'):]
    sec = sec[:sec.index("</section>")]
    for f in ("idle_breakdown.csv", "late_arrivals.csv", "op_efficiency.csv",
              "link_bandwidth.csv", "collective_bandwidth.csv"):
        assert f"Numbers: {f}" in sec, f
    # the pp wait's late rank and stage 1's output layer, as late_arrivals.csv has them
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", sec)
    assert "hcom_batchSendRecv__128_4_1" in cells
    assert "MatMulV3 [4096,151936;151936,1024]" in cells
    # Qwen3 kept no trace_view.json: the page says dispatch cannot be seen
    assert "no launch links" in sec
    # an output with the step breakdown only: not in this analysis
    part = tmp_path / "partial"
    part.mkdir()
    shutil.copy(out / "cluster_step_trace_time.csv", part)
    assert _cli("report", part).exit_code == 0
    page = (part / "report.html").read_text(encoding="utf-8")
    sec = page[page.index('<section id="why"'):]
    assert "Not in this analysis" in sec[:sec.index("</section>")]
