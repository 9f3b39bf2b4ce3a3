"""The fast communication.json reader (ascendprof.readers.communication.fast) streaming a real
rank's file (read the way a big file is, in small blocks): the block scan runs ahead in a
background thread, which must be a daemon named "ascendprof-comm-scan" (so a thread listing
says whose it is), must end when the iteration is closed without scanning the rest of the file, and must not keep
a program alive that stops reading half way through a file and exits.

Expected values are what the reader's contract says (one thread of that name while a read is
under way; a daemon, as Python defines it: a program whose only other threads are daemons
exits when its main thread ends), checked against the running interpreter and a child
process.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from ascendprof.readers.communication import fast as F
from conftest import QWEN3, ROOT

REAL = sorted(QWEN3.glob("rank_*/ASCEND_PROFILER_OUTPUT/communication.json"))[0]
NAME = "ascendprof-comm-scan"


def test_a_streamed_read_scans_in_one_named_daemon_thread_that_ends_on_close():
    """Half way through a streamed file (many 512-byte blocks, so the producer is still
    running), there is one thread named "ascendprof-comm-scan" and it is a daemon; closing the
    iteration ends it."""
    before = set(threading.enumerate())
    it = F.iter_tables(REAL, 0, None, whole_file_bytes=0, block_bytes=512)
    try:
        next(it)
        new = [t for t in threading.enumerate() if t not in before]
        names, daemons = [t.name for t in new], [t.daemon for t in new]
    finally:  # closed even when an assertion fails: a non-daemon thread would hang pytest
        it.close()
    assert names == [NAME]
    assert daemons == [True]
    deadline = time.monotonic() + 10
    while new[0].is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not new[0].is_alive()


CHILD = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from ascendprof.readers.communication import fast as F
KEPT = F.iter_tables({str(REAL)!r}, 0, None, whole_file_bytes=0, block_bytes=512)
next(KEPT)  # one batch read; the rest of the file never is, and KEPT lives until the end
print("read one batch", flush=True)
"""


def test_a_program_that_stops_reading_half_way_still_exits():
    """A program that reads the first batch of a streamed file and ends with the iteration
    still open (held in a global, so never closed before the interpreter waits for its
    non-daemon threads) exits at once; a non-daemon scan thread would wait forever on the full
    queue for a consumer that never comes."""
    r = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "read one batch\n"


def test_an_abandoned_streamed_read_stops_scanning_the_file(monkeypatch):
    """Closing the iteration after the first batch stops the scan thread from reading on: of a
    file of many blocks (512 bytes each), only the few already queued ahead (the queue holds 2)
    or being put are scanned, not the rest of the file."""
    scanned = []

    class Counting(F.Scanner):
        def blocks(self):
            for b in super().blocks():
                scanned.append(1)
                yield b

    total = sum(1 for _ in F.Scanner(REAL, 512).blocks())  # the file read to its end
    assert total >= 10
    monkeypatch.setattr(F, "Scanner", Counting)
    it = F.iter_tables(REAL, 0, None, whole_file_bytes=0, block_bytes=512)
    try:
        next(it)
    finally:
        it.close()
    assert 1 <= len(scanned) <= 1 + 2 + 1  # the one handed out, the queue's two, one being put
