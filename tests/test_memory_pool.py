"""``ascendprof analyse`` has Arrow allocate through the C library's malloc, its C++ default
pool included (the pool Arrow's own Parquet / IPC / compute code allocates from), unless the
user chose a pool: mimalloc kept what that code freed (~0.13 GB of a 230 MB
communication.json's rank after the rank was done)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# after the setting, Parquet written and read back: what Arrow's C++ code took from mimalloc
PROBE = """
import sys, tempfile, os
from ascendprof.engine.run import _release_freed_memory
assert "pyarrow" not in sys.modules
_release_freed_memory()
import pyarrow as pa, pyarrow.parquet as pq
path = os.path.join(tempfile.mkdtemp(), "t.parquet")
pq.write_table(pa.table({"a": list(range(200_000)), "b": [str(i) for i in range(200_000)]}), path)
t = pq.read_table(path)
print(pa.mimalloc_memory_pool().max_memory() > 0)
"""


@pytest.mark.parametrize("chosen, want", [(None, "False"), ("mimalloc", "True")])
def test_arrow_default_pool(chosen, want):
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [want]
