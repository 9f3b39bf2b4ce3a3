"""What a profiling source is: the data of one rank from one producer, as the scanner found it.

Every layer speaks of sources: the scanner creates them, the readers read them, the engine
schedules them and the report lists them. The kinds name the producers and their exports.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ascendprof.model.problems import printable

TORCH_TEXT = "torch_npu"
MS_TEXT = "mindspore"
DB = "db"
PROF = "prof"
RAW_CANN = "raw_cann"
LEGACY_MS = "legacy_mindspore"

KIND_LABELS = {
    TORCH_TEXT: "torch_npu text",
    MS_TEXT: "MindSpore text",
    DB: "db export",
    PROF: "PROF_ (msprof)",
    RAW_CANN: "raw CANN data, decoded by ascendprof",
    LEGACY_MS: "legacy MindSpore",
}


@dataclass
class Source:
    """One rank's data from one producer. ``files`` are paths relative to ``path``."""

    path: str
    kind: str
    rank: int | None
    device_id: int | None = None
    rank_origin: str = ""
    framework_version: str | None = None
    cann_version: str | None = None
    profiler_level: str | None = None
    steps: list[int] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    analyses: list[str] = field(default_factory=list)
    mtime: float = 0.0
    also: list[str] = field(default_factory=list)  # other producers present but not used
    #: who wrote it: "torch_npu", "mindspore", "legacy_mindspore" or "cann" (scan.runs)
    framework: str | None = None
    #: collection end (ns since the epoch; profiler_info end_info / PROF_ end_info), if known
    end_ns: int | None = None
    #: host name (``{host}_{pid}_{timestamp}_ascend_pt`` directory names, PROF_ info.json)
    host: str | None = None
    #: the run (collection) it belongs to: runs.group_runs names it
    run: str | None = None

    @property
    def label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind)

    def as_dict(self) -> dict:
        """The source as JSON-able data (a path that is not UTF-8 shown with ``\\x`` escapes)."""
        d = asdict(self)
        d["path"] = printable(self.path)
        d["files"] = [printable(f) for f in self.files]
        d["kind_label"] = self.label
        return d

    def file(self, name: str) -> Path | None:
        """Absolute path of the first listed file whose basename is ``name`` (or None)."""
        for f in self.files:
            if os.path.basename(f) == name:
                return Path(self.path) / f
        return None
