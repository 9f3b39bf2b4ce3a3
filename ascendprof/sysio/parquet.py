"""Parquet encoding of the cache and of ``tables/``."""

from __future__ import annotations

#: Parquet writer options of the cache and of tables/ (which links to the cache): no dictionary
#: pages or column statistics, which cost a third of the write time and buy nothing for files
#: read whole (snappy keeps them near the dictionary-encoded size)
PARQUET_OPTIONS = {"use_dictionary": False, "write_statistics": False}


def parquet_bytes(table):
    """``table`` encoded as a Parquet file in memory (:data:`PARQUET_OPTIONS`), to be written
    with one call (the writer makes a system call per page when given a file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = pa.BufferOutputStream()
    pq.write_table(table, buf, **PARQUET_OPTIONS)
    return buf.getvalue()


