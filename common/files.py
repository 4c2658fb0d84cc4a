"""Atomic file writes (every report, result and cache the harness writes) and a run's own folder.

Atomic: written to a temporary file in the same folder, flushed to disk, then renamed over the target,
so a run killed at any moment leaves the previous file or the new one, never half of one; `signals_deferred` holds
Ctrl-C and SIGTERM off a set of files that belong together. A leaf: it imports nothing from common/, so any module
may use it."""
from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import math
import os
import signal
import tempfile
import threading
from pathlib import Path
from typing import Iterable

RUNS_DIR = Path(__file__).resolve().parent.parent / "profiles" / "runs"  # user runs; .gitignore covers it


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (os.umask sets it as it reads it)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, chunks: Iterable[str | bytes]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates it 0600; a report is for reading: the mode open() would give (0644 under umask 022)
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk.encode() if isinstance(chunk, str) else chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_DEFERRED = (signal.SIGTERM, signal.SIGINT)  # with both held, SIGTERM acts: its default ends the process at once


@contextlib.contextmanager
def signals_deferred():
    """SIGTERM and SIGINT that arrive inside the block act when it ends, each with the handler it had before: a report
    is written whole (results.json, written last, included), then the signal stops the process. Yields the list of
    signals held so far, for a block that wants to say so. A signal ignored before stays ignored. If the block raises,
    its error propagates and the held signals are dropped: that error is what ends the run. Python runs handlers in
    the main thread only, whichever thread the signal reached; elsewhere this holds nothing."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)  # none lands while the handlers change
    previous = {s: h for s in _DEFERRED if (h := signal.getsignal(s)) not in (signal.SIG_IGN, None)}
    try:
        for s in previous:
            signal.signal(s, lambda signum, frame: held.append(signum))
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        yield held
        signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
        for s in set(held):  # pending while blocked: each meets its own handler once the mask is restored
            signal.raise_signal(s)
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
        for s, handler in previous.items():
            signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def atomic_write_json(path: Path, obj) -> None:
    atomic_write(path, [json.dumps(finite(obj), indent=2, default=_json_default) + "\n"])


def _json_default(o):
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def finite(obj):
    """JSON has no NaN/Inf: null instead, so every reader can load the file."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [finite(v) for v in obj]
    return obj


def run_name(tag: str, now: datetime.datetime | None = None) -> str:
    """<YYYYMMDD-HHMMSS>-<tag> (UTC): how every run's output under runs/ is named."""
    return f"{now or datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}-{tag}"


def new_run_folder(tag: str, runs: Path | None = None, now: datetime.datetime | None = None) -> Path:
    """A folder of this run's own, runs/<YYYYMMDD-HHMMSS>-<tag> (UTC, as benchmark.py names its runs), with
    -2, -3, ... when that exists: created here, so that two runs in the same second never share one."""
    runs = Path(runs or RUNS_DIR)
    runs.mkdir(parents=True, exist_ok=True)
    base = run_name(tag, now)
    for n in itertools.count(1):
        path = runs / (base if n == 1 else f"{base}-{n}")
        with contextlib.suppress(FileExistsError):
            path.mkdir()
            return path
