"""Recording what was skipped, so partial data is analysed as far as it goes and reported.

A :class:`Problem` is one skipped file, record range, rank or analysis. Readers append to a
:class:`Problems` list instead of raising when the rest of the rank is still usable; the report
shows every problem (terminal, ``problems.csv``, JSON summary).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ascendprof.model.errors import InputError


def printable(text) -> str:
    """``text`` as valid Unicode: a path whose bytes are not UTF-8 (decoded by Python with
    surrogate escapes) shows them as ``\\xNN``, so it can be printed and written to JSON and
    CSV. Other text is returned unchanged."""
    text = str(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class Problem:
    """One thing not analysed, and why.

    ``severity`` is ``"warning"`` (data kept, something odd) or ``"skipped"`` (data dropped).
    ``affects`` names the analyses that lose input (e.g. ``"step_breakdown"``).
    """

    path: str
    reason: str
    rank: int | None = None
    where: str = ""
    severity: str = "skipped"
    affects: tuple[str, ...] = ()

    def __post_init__(self):  # names that are not UTF-8 must not break a report
        for name in ("path", "reason", "where"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, printable(value))

    def line(self) -> str:
        loc = f" at {self.where}" if self.where else ""
        who = f"rank {self.rank}: " if self.rank is not None else ""
        return f"{who}{self.path}{loc}: {self.reason}"

    def as_dict(self) -> dict:
        d = asdict(self)
        d["affects"] = list(self.affects)
        return d


@dataclass
class Problems:
    """An append-only list of :class:`Problem` for one rank or one command run."""

    items: list[Problem] = field(default_factory=list)

    def add(self, path, reason: str, *, rank=None, where="", severity="skipped", affects=()):
        self.items.append(Problem(str(path), reason, rank, str(where), severity, tuple(affects)))

    def add_error(self, err: InputError, *, rank=None, affects=()):
        where = err.where if err.where is None else str(err.where)
        if isinstance(err.where, int):
            where = f"byte {err.where}"
        self.items.append(Problem(err.path, err.reason, rank, where or "", "skipped", tuple(affects)))

    def warn(self, path, reason: str, *, rank=None, where=""):
        self.add(path, reason, rank=rank, where=where, severity="warning")

    def extend(self, other: "Problems | list[Problem]"):
        self.items.extend(other.items if isinstance(other, Problems) else other)

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)

    @property
    def skipped(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "skipped"]

    def dedupe(self) -> None:
        """Drop repeats of one problem (same file, place, reason and severity), e.g. a damaged
        profiler_info.json seen by the scanner and again by the reader; the copy that knows the
        rank is kept, in the position of the first."""
        first: dict[tuple, int] = {}
        out: list[Problem] = []
        for p in self.items:
            key = (p.path, p.where, p.reason, p.severity)
            if key not in first:
                first[key] = len(out)
                out.append(p)
            elif out[first[key]].rank is None and p.rank is not None:
                out[first[key]] = p
        self.items = out

    def brief(self, limit: int = 3) -> str:
        """The first ``limit`` skipped problems as one line (``"<line>; <line> (and N more)"``),
        for an error that ends the run; '' when nothing was skipped."""
        skipped = self.skipped
        text = "; ".join(p.line() for p in skipped[:limit])
        if len(skipped) > limit:
            text += f" (and {len(skipped) - limit} more)"
        return " ".join(text.split())  # one line, whatever the reasons hold
