#!/usr/bin/env python3
"""Screenshots of report.html for the README and docs/outputs.md.

    .venv/bin/python docs/make_screenshots.py [OUT_DIR]

Analyses fixtures/qwen3-4rank-pp2dp2 (into a temporary directory unless OUT_DIR, an existing
analysis, is given) and a generated 256-rank cluster (benchmarks/make_cluster.py, from the
sample's ranks), opens each report.html in Debian's headless Chromium (/usr/bin/chromium, or
$ASCENDPROF_CHROMIUM) through Playwright with networking off, and writes:

- docs/report/first-screen.png and docs/report/first-screen-256.png: the first 1400x900
  screen (the headline and the first verdict);
- docs/report/<section>.png: each section of the sample's page at 1280 px width.

Run it after changing the page, and look at every PNG.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "docs" / "report"
SECTIONS = ["diagnosis", "steps", "pipeline", "communication", "operators", "memory", "dataprep",
            "problems"]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", "--disable-quic"]
READY = "window.ASCENDPROF && window.ASCENDPROF.ready"


def _analyse(src: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "ascendprof", "analyse", str(src), "-o", str(out),
                    "-q", "--html"], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return out


def main(argv: list[str]) -> int:
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="ascendprof-shots-"))
    out = Path(argv[0]) if argv else _analyse(ROOT / "fixtures" / "qwen3-4rank-pp2dp2",
                                              tmp / "qwen3")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_cluster.py"), "256",
                    str(tmp / "c256"), "--kernels-per-rank", "20", "--comm-ops-per-rank", "10"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    big = _analyse(tmp / "c256", tmp / "c256-out")
    DEST.mkdir(parents=True, exist_ok=True)
    exe = os.environ.get("ASCENDPROF_CHROMIUM", "/usr/bin/chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=ARGS)
        for page_dir, name in ((out, "first-screen.png"), (big, "first-screen-256.png")):
            ctx = browser.new_context(offline=True, viewport={"width": 1400, "height": 900})
            page = ctx.new_page()
            page.goto((page_dir / "report.html").resolve().as_uri())
            page.wait_for_function(READY)
            page.wait_for_timeout(300)
            page.screenshot(path=str(DEST / name))
            print((DEST / name).relative_to(ROOT))
            ctx.close()
        ctx = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.goto((out / "report.html").resolve().as_uri())
        page.wait_for_function(READY)
        page.add_style_tag(content="nav { position: static !important; }")  # not over sections
        for s in SECTIONS:  # draw the charts of every section (they are drawn when visible)
            page.locator(f"#{s}").scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        for s in SECTIONS:
            path = DEST / f"{s}.png"
            page.locator(f"#{s}").screenshot(path=str(path))
            print(path.relative_to(ROOT))
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
