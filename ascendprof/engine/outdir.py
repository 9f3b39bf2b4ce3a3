"""The output directory of ``analyse``: one run at a time, a whole set of files or none, and
nothing removed that ascendprof did not write.

- **Lock.** ``OUT/.ascendprof.lock`` is held (``fcntl.flock``) for the whole run; a second run
  into the same directory fails at once with exit 2 (:class:`OutputBusy`).
- **Manifest.** ``OUT/.ascendprof-manifest.json`` lists the files (and every file under
  ``tables/``) the last complete run wrote. Only those are ever replaced or removed. An existing
  output name that is not in it (the user's own ``tables/``, a file of an older tool) makes the
  run stop before any work, with exit 2 (:class:`OutputConflict`).
- **Staging.** A run writes its whole set into ``OUT/.ascendprof-staging-<pid>/`` and
  :meth:`OutputDir.commit` moves it in: a journal is written first, the old manifest is
  removed, each name is renamed into place (a directory replaced by moving the old one to
  ``OUT/.ascendprof-trash-<pid>/``), names of the last run that this run did not write are
  removed, and the new manifest comes last. SIGINT / SIGTERM / SIGHUP are held back during those
  renames, so an interrupted run leaves the previous set or the new one. When the process is
  killed (SIGKILL, power loss) in the middle, there is no manifest until the next run into the
  directory completes the journal (roll forward); a staging directory without a journal (a
  run that died earlier) is removed by the next run, with the leftovers of older versions
  (``.<output>.<pid>.early``, ``.<output>.*.tmp``).

Which names are outputs comes from one registry, :data:`ascendprof.model.outputs.OUTPUT_FILES`
plus ``tables/``: an analysis that adds an output file adds its name there.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import stat
from pathlib import Path

import orjson

from ascendprof.model.errors import OutputError, UsageError
from ascendprof.sysio.atomic import write_bytes
from ascendprof.sysio.lifetime import deferred_signals
from ascendprof.sysio.ownership import (is_managed, LOCK, MANIFEST, read_manifest, STAGING_PREFIX,
                                        TABLES, TRASH_PREFIX)

JOURNAL = ".commit"
FORMAT = 1


class OutputBusy(OutputError):
    """Another run holds the output directory's lock (exit 2)."""


class OutputConflict(OutputError):
    """An output name exists that ascendprof did not write (exit 2)."""


def check_output_dir(out: Path, inputs: list[Path], names=None, *,
                     inside_ok: bool = False) -> Path:
    """Resolve ``out`` and refuse (UsageError, exit 2) an output directory that is an existing
    file, lies inside (or equals) an input directory (inside it is allowed with ``inside_ok``:
    ``analyse`` writes beside the ranks, as msprof-analyze does, and its scan skips its own
    output; :func:`check_not_in_sources` then refuses a rank's own folder), or whose own files
    would cover an input:
    with the output names ``names`` given (the registry of the ``analyse`` outputs), an input
    at or under ``out/<name>``, ``out/tables`` or one of ascendprof's hidden files there
    (``analyse /x/tables -o /x`` would otherwise replace its own input).

    Returns the resolved path (not created).
    """
    out = Path(out).resolve()
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a directory; choose another --output")
    for i in inputs:
        i = Path(i).resolve()
        if i.is_dir() and (out == i or (i in out.parents and not inside_ok)):
            raise UsageError(f"{out}: output directory is inside the input {i}; choose another -o")
        if names is not None and out in i.parents:
            top = i.relative_to(out).parts[0]
            if is_managed(top, names):
                raise UsageError(f"{i}: this input lies in {out / top}, which ascendprof "
                                 f"writes as an output of {out}; choose another -o")
    return out


def check_not_in_sources(out: Path, sources) -> None:
    """Refuse (UsageError) an output directory inside a rank's own profiling directory."""
    out = Path(out).resolve()
    for s in sources:
        p = Path(s.path).resolve()
        if out == p or p in out.parents:
            raise UsageError(f"{out}: output directory is inside the profiling directory {p}; "
                             f"choose another -o")


class OutputDir:
    """One run's hold on an output directory (a context manager).

    ``names``: the output files the run may write (the registry); ``tables``: whether it writes
    ``tables/``. Entering creates the directory, takes the lock (OutputBusy), finishes or
    removes what dead runs left, checks that every name the run may replace is ascendprof's
    (OutputConflict) and creates :attr:`staging`. Leaving without :meth:`commit` removes the
    staging directory: the previous outputs stay as they were. Other OSErrors from the output
    side become :class:`~ascendprof.model.errors.OutputError` (exit 2).
    """

    def __init__(self, out: Path, names, *, tables: bool = True):
        self.out = Path(out)
        self.names = tuple(names)
        self.tables = tables
        self.staging = self.out / f"{STAGING_PREFIX}{os.getpid()}"
        self._lock_fd: int | None = None
        self._old: dict | None = None
        self.committed = False

    # ------------------------------------------------------------------ enter / leave
    def __enter__(self) -> "OutputDir":
        try:
            self._enter()
        except BaseException:
            self._unlock()
            raise
        return self

    def _enter(self) -> None:
        out = self.out
        if out.is_dir() and not os.path.lexists(out / LOCK):
            # never used by ascendprof (so no run holds it): refuse before writing anything
            self._old = read_manifest(out)
            self._check_replaceable()
        try:
            out.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise OutputError(f"{out}: not a directory; choose another --output") from None
        except OSError as e:
            raise OutputError(f"{out}: cannot create the output directory: "
                              f"{e.strerror or e}") from None
        if not out.is_dir():
            raise OutputError(f"{out}: not a directory; choose another --output")
        self._lock()
        try:
            recover(out, self.names)
            self._old = read_manifest(out)
            self._check_replaceable()
            self.staging.mkdir()
        except OSError as e:
            raise _output_error(out, e) from None

    def __exit__(self, typ, err, tb):
        try:
            if not self.committed:
                shutil.rmtree(self.staging, ignore_errors=True)
        finally:
            self._unlock()
        return False

    def _lock(self) -> None:
        path = self.out / LOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                         | os.O_NONBLOCK, 0o644)
        except OSError as e:
            raise _output_error(self.out, e) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OutputError(f"{path}: not a regular file; remove it")
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise OutputBusy(f"{self.out}: another ascendprof run (pid {holder}) is writing to "
                             f"this directory; wait for it to finish or choose another "
                             f"--output") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    # ------------------------------------------------------------------ ownership
    def _check_replaceable(self) -> None:
        """Refuse (OutputConflict) when a name this run may write or remove exists and is not
        the file or directory the last run's manifest lists."""
        old = self._old or {"files": [], "tables": []}
        ours = set(old["files"])
        mine = set(self.names) | ({TABLES} if self.tables else set())
        for name in sorted(mine | ours):
            p = self.out / name
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            if name not in ours:
                if name not in mine:
                    continue
                raise OutputConflict(
                    f"{p} exists and ascendprof did not write it (it is not listed in "
                    f"{self.out / MANIFEST}); move it away or choose another --output")
            want_dir = name == TABLES
            if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode) != want_dir or not (
                    stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                raise OutputConflict(f"{p} was replaced since ascendprof wrote it (now a "
                                     f"{_kind(st.st_mode)}); move it away or choose another "
                                     f"--output")
            if want_dir:
                extra = _foreign_files(p, set(old["tables"]))
                if extra:
                    raise OutputConflict(
                        f"{extra[0]} was not written by ascendprof"
                        + (f" (and {len(extra) - 1} more under {p})" if len(extra) > 1 else "")
                        + f"; ascendprof replaces {p} as a whole: move it away or choose "
                          f"another --output")

    def clear_staging(self) -> None:
        """Empty :attr:`staging` (before writing a set into it afresh)."""
        if any(os.scandir(self.staging)):
            shutil.rmtree(self.staging)
            self.staging.mkdir()

    # ------------------------------------------------------------------ commit
    def commit(self) -> None:
        """Put the staged set in place of the last run's (see the module docstring). Raises
        OutputConflict when a staged name appeared meanwhile and is not ascendprof's."""
        staged = sorted(n for n in os.listdir(self.staging) if n not in (MANIFEST, JOURNAL))
        old = self._old or {"files": [], "tables": []}
        for name in staged:  # a name outside the registry, or one created during the run
            if name not in old["files"] and os.path.lexists(self.out / name):
                raise OutputConflict(
                    f"{self.out / name} exists and ascendprof did not write it (it is not "
                    f"listed in {self.out / MANIFEST}); move it away or choose another --output")
        tables = self.staging / TABLES
        manifest = {"tool": "ascendprof", "format": FORMAT, "files": staged,
                    "tables": _relative_files(tables) if tables.is_dir() else []}
        try:
            _write_new(self.staging / MANIFEST, orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
            journal = {"files": staged, "remove": sorted(set(old["files"]) - set(staged))}
            _write_new(self.staging / JOURNAL, orjson.dumps(journal))
        except OSError as e:
            raise _output_error(self.out, e) from None

        with deferred_signals():  # a signal waits until the old set's remains are gone too
            self.committed = True  # from here on the staging directory is rolled forward
            roll_forward(self.out, self.staging)
            finish(self.out, self.staging)


def adopt(out: Path, name: str) -> None:
    """Add ``name`` (a file ascendprof has just written into ``out`` outside a run, e.g.
    ``ascendprof report``'s page) to the manifest of ``out``, so runs may replace or remove it.
    Taken under the lock; OutputBusy while a run writes to ``out``; nothing without a manifest."""
    with _Locked(out):
        doc = read_manifest(out)
        if doc is None or name in doc["files"]:
            return
        doc["files"] = sorted(doc["files"] + [name])

        write_bytes(Path(out) / MANIFEST, orjson.dumps(doc, option=orjson.OPT_INDENT_2))


class _Locked(OutputDir):
    """Only the lock of :class:`OutputDir` (no staging, no checks)."""

    def __init__(self, out: Path):
        super().__init__(out, ())

    def __enter__(self):
        self._lock()
        return self

    def __exit__(self, *exc):
        self._unlock()
        return False


def roll_forward(out: Path, staging: Path) -> None:
    """Complete the journal of ``staging`` (idempotent: safe to repeat after a crash at any
    point). The new manifest is moved last, so its presence means the set is complete."""
    journal = orjson.loads((staging / JOURNAL).read_bytes())
    if not (staging / MANIFEST).exists():
        return  # the last step was done
    trash = out / (TRASH_PREFIX + staging.name[len(STAGING_PREFIX):])
    if (out / MANIFEST).exists():  # no manifest while the set is mixed
        os.unlink(out / MANIFEST)
    for name in journal["files"]:
        src, dst = staging / name, out / name
        if not os.path.lexists(src):
            continue  # moved before a crash
        if os.path.isdir(src) and os.path.lexists(dst):
            _to_trash(dst, trash)
        if _same_file(src, dst):  # two links of one cached file: rename() would do nothing
            os.unlink(src)
        else:
            os.replace(src, dst)
    for name in journal["remove"]:
        if os.path.lexists(out / name):
            _to_trash(out / name, trash)
    os.replace(staging / MANIFEST, out / MANIFEST)


def finish(out: Path, staging: Path) -> None:
    """Remove what a committed run no longer needs (its trash and staging directories)."""
    trash = out / (TRASH_PREFIX + staging.name[len(STAGING_PREFIX):])
    shutil.rmtree(trash, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)


def recover(out: Path, names=()) -> list[str]:
    """Finish or remove what runs that died left in ``out`` (call with the lock held): a staging
    directory with a journal is rolled forward, one without is removed, trash is removed, and
    so are the temporary files of a write that died (``.<output>.<pid>.early``,
    ``.<output>.*.tmp``). Returns the names handled."""
    handled = []
    legacy = _legacy_pattern(names)
    for entry in sorted(os.listdir(out)):
        p = out / entry
        if entry.startswith(STAGING_PREFIX) and os.path.isdir(p) and not os.path.islink(p):
            if (p / JOURNAL).is_file():
                try:
                    with deferred_signals():
                        roll_forward(out, p)
                except (OSError, ValueError, KeyError, TypeError):
                    pass  # an unreadable journal: the set stays as it is, without a manifest
            finish(out, p)
        elif entry.startswith(TRASH_PREFIX) and os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        elif legacy.match(entry) and os.path.isfile(p) and not os.path.islink(p):
            os.unlink(p)
        else:
            continue
        handled.append(entry)
    return handled


def _legacy_pattern(names):
    """Temporary names of ascendprof's writers outside the staging directory:
    ``.<output>.<pid>.early`` (the early communication writer) and ``.<output>.<random>.tmp``
    (atomic writes)."""
    alts = "|".join(re.escape(n) for n in sorted(names)) or r"(?!)"
    return re.compile(rf"^\.(?:{alts})\.(?:\d+\.early|[A-Za-z0-9_]+\.tmp)$")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _to_trash(path: Path, trash: Path) -> None:
    trash.mkdir(exist_ok=True)
    os.replace(path, trash / path.name)


def _write_new(path: Path, data: bytes) -> None:
    with open(path, "xb") as f:
        f.write(data)


def _relative_files(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        out += sorted(f if rel == "." else f"{rel}/{f}" for f in filenames)
    return out


def _foreign_files(root: Path, listed: set[str]) -> list[str]:
    """Paths under ``root`` that are not regular files listed in ``listed`` (relative paths);
    symlinks and special files count as foreign, directories only through their content."""
    extra = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            r = name if rel == "." else f"{rel}/{name}"
            if os.path.islink(p) or (name in filenames and (
                    r not in listed or not os.path.isfile(p))):
                extra.append(p)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    return sorted(extra)


def _kind(mode: int) -> str:
    return ("symbolic link" if stat.S_ISLNK(mode) else "directory" if stat.S_ISDIR(mode)
            else "regular file" if stat.S_ISREG(mode) else "special file")


def _output_error(out: Path, e: OSError) -> OutputError:
    where = e.filename or out
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return OutputError(f"{where}: cannot write the output: {e.strerror}")
    return OutputError(f"{where}: {e.strerror or e}")
