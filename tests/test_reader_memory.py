"""Reading a rank keeps nothing of it once its tables are dropped: a worker reads hundreds of
ranks in one process, so whatever a read leaves behind adds up rank after rank."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from ascendprof.readers import read_source
from ascendprof.scan import load_sources

SAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "qwen3-4rank-pp2dp2"


def _retained_after(reads: int, read) -> int:
    """Bytes of Python memory still held after ``reads`` calls of ``read`` (after a warm-up:
    module-level caches fill on the first calls)."""
    for _ in range(3):
        read()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(reads):
            read()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_reading_a_rank_again_and_again_holds_no_more_memory():
    # the rank's communication.json is 17 KB: a read that kept its text (as converting
    # memoryviews of it with pa.array did) leaves >= 17 KB behind per read (48 KB measured),
    # >= 136 KB over 8 reads. What other modules' bounded caches take on first use stays
    # well under 3 files' worth (~20 KB seen inside the whole suite)
    source = load_sources(SAMPLE)[0]
    size = (Path(source.path) / "ASCEND_PROFILER_OUTPUT" / "communication.json").stat().st_size
    assert size > 16_000
    retained = _retained_after(8, lambda: read_source(source))
    assert retained < 3 * size, retained
