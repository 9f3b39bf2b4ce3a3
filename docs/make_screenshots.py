#!/usr/bin/env python3
"""Screenshots of each section of the Qwen3 sample's report.html, for the README.

    .venv/bin/python docs/make_screenshots.py [OUT_DIR]

Analyses fixtures/qwen3-4rank-pp2dp2 (into a temporary directory unless OUT_DIR, an existing
analysis, is given), opens report.html in Debian's headless Chromium (/usr/bin/chromium, or
$ASCENDPROF_CHROMIUM) through Playwright with networking off, and writes
docs/report/<section>.png at 1280 px width. Run it after changing the page, look at every PNG.
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


def main(argv: list[str]) -> int:
    from playwright.sync_api import sync_playwright

    if argv:
        out = Path(argv[0])
    else:
        out = Path(tempfile.mkdtemp(prefix="ascendprof-shots-")) / "qwen3"
        subprocess.run([sys.executable, "-m", "ascendprof", "analyse",
                        str(ROOT / "fixtures" / "qwen3-4rank-pp2dp2"), "-o", str(out), "-q"],
                       check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    DEST.mkdir(parents=True, exist_ok=True)
    exe = os.environ.get("ASCENDPROF_CHROMIUM", "/usr/bin/chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=ARGS)
        ctx = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.goto((out / "report.html").resolve().as_uri())
        page.wait_for_function("window.Bokeh && Bokeh.documents.length > 0 "
                               "&& Bokeh.documents[0].is_idle")
        page.add_style_tag(content="nav { position: static !important; }")  # not over sections
        page.wait_for_timeout(500)
        for s in SECTIONS:
            path = DEST / f"{s}.png"
            page.locator(f"#{s}").screenshot(path=str(path))
            print(path.relative_to(ROOT))
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
