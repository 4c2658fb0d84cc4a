"""The command line: benchmark.py's, and a pair file's (`python ch1/baseline_x.py` runs only that pair).

A run, in order: --compare and --list read files and exit (no device); select and import the pairs (a file
that breaks the contract is FAILED to load, never a traceback); check every input before the first pair (device,
profiler, a --pair that cannot run here, the output folder); the ceilings (common.peaks); each pair in its own
process (common.launch), one that cannot run here skipped without one; the report (common.report), also of what
finished before a Ctrl-C or SIGTERM (_run_all, _report).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from common import peaks as ceilings
from common.cuda_ext import build_declared
from common.discover import CHAPTER_DIR, VARIANT_RULE, UnknownSelection, load_pair, pair_files, select
from common.files import RUNS_DIR, new_run_folder, run_name, signals_deferred  # runs/: user runs
from common.host import host_info
from common.launch import SPARE_AFTER, TOOL_PROFILERS, RunSpec, Spare, run_in_subprocess, tool_missing, worker_env
from common.pair import REPO_ROOT, SWEEP_DTYPES, Pair, pair_record
from common.report import CompareRefused, compare_runs, merge_runs, summary_markdown, write_report
from common.results import SCHEMA_VERSION, read_results
from common.timing import BUDGET_S, QUICK_BUDGET_S

EXAMPLES = """\
Examples
  python benchmark.py                      every chapter, report in a new folder under profiles/runs/
  python benchmark.py --chapter 1          one chapter
  python benchmark.py --pair batched_gemm  one pair (or ch1/batched_gemm)
  python benchmark.py --list               chapters, pairs and variants, one line each
  python benchmark.py --quick --chapter 1  a short smoke run (small sizes, short time budget)
  python benchmark.py --peaks              measure this device's ceilings and cache them
  python benchmark.py --profile torch --pair cuda_graphs
                                           add a torch.profiler trace of each variant
  python benchmark.py --pair softmax --sizes 4096 8192 --dtypes float32 bfloat16
                                           a sweep: one run and one report row per point, for the
                                           pairs that take a size and dtype (--list says "sweeps")
  python benchmark.py --compare profiles/h100/ch1/results.json profiles/runs/<run>/results.json
  python benchmark.py --compare before after
                                           each side a folder of several runs (--output before/1, ...)

Reports of your runs go to profiles/runs/<date>-<device>/, which git ignores; the
committed reports quoted in the READMEs live under profiles/<gpu>/.
Exit status: 0 all verified, 1 something failed or is SUSPECT (the report says what), 2 bad input,
130 interrupted (Ctrl-C; the pairs that finished are written, marked interrupted), 143 the same on SIGTERM.
"""

def seconds(text: str) -> float:
    """--budget and --timeout: a positive, finite number of seconds (nan, 0 and -1 ran, or failed every pair)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf):
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number of seconds, e.g. 5")
    return value


# benchmark.py's options that make no sense for one pair file
NOT_FOR_A_PAIR_FILE = ("--chapter", "--pair", "--list", "--compare", "--peaks", "--no-report", "--root")


class ArgParser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as for every other bad input
        print(f"error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


class Interrupted(BaseException):
    """SIGINT (as KeyboardInterrupt) or SIGTERM arrived; BaseException so that no `except Exception` eats it."""
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def build_parser(pair_file: Path | None = None) -> argparse.ArgumentParser:
    if pair_file:
        rel = _shown(pair_file)
        ap = ArgParser(prog=f"python {rel}",
                       description="Run the pair this file belongs to: verify every variant against the baseline, "
                                   "time them, print the comparison. Other pairs: python benchmark.py --help.",
                       epilog=f"Examples\n  python {rel} --quick\n  python {rel} --output /tmp/pair-run",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    else:
        ap = ArgParser(prog="python benchmark.py",
                       description="Run the chapters' baseline/optimized pairs: verify, time, report.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
        ap.add_argument("--chapter", type=int, action="append", metavar="N",
                        help="run chapter N (repeatable), e.g. --chapter 1; default: every chapter")
        ap.add_argument("--pair", action="append", metavar="NAME",
                        help="run one pair, by name or chN/name (repeatable), e.g. --pair batched_gemm")
        ap.add_argument("--list", action="store_true",
                        help="list chapters, pairs and variants with a line each, then exit, e.g. --list --chapter 11")
    ap.add_argument("--quick", action="store_true", help=f"smoke run: each pair's small size and a {QUICK_BUDGET_S} "
                    f"s timing budget per variant, e.g. --quick")
    ap.add_argument("--device", choices=("cuda", "cpu"),
                    help="default: cuda when a GPU is visible, else cpu, e.g. --device cpu to try the CPU paths")
    ap.add_argument("--budget", type=seconds, metavar="S", help=f"timing budget per variant in seconds (default "
                    f"{BUDGET_S:g}, --quick {QUICK_BUDGET_S}), e.g. --budget 5")
    ap.add_argument("--timeout", type=seconds, default=600, metavar="S", help="stop a pair's process S seconds after "
                    "it has loaded the pair (its start and the torch import are not counted) and record it as failed, "
                    "keeping the variants it finished (default 600), e.g. --timeout 120")
    ap.add_argument("--sizes", type=int, nargs="+", metavar="N", help="run each pair that takes a size once per size, "
                    "one report row each (what a size counts is the pair's: its baseline's SWEEP says); pairs that "
                    "take none are left out, e.g. --sizes 4096 8192")
    ap.add_argument("--dtypes", nargs="+", choices=SWEEP_DTYPES, metavar="DTYPE",
                    help=f"as --sizes, for the input dtype ({', '.join(SWEEP_DTYPES)}); with --sizes, every "
                         f"combination, e.g. --dtypes float32 bfloat16")
    ap.add_argument("--profile", choices=("torch", *TOOL_PROFILERS), help="also profile each variant's timed call: "
                    "torch.profiler trace (Chrome/Perfetto JSON), or an nsys / ncu report, written next to "
                    "results.json, e.g. --profile torch")
    ap.add_argument("--output", type=Path, metavar="DIR", help=(
        "also write the report (results.json, summary.md, figures) into DIR, new or without a report in it; "
        "default: print the comparison only, e.g. --output /tmp/run1" if pair_file else
        "report folder, new or without a report in it (default: a new folder profiles/runs/<date>-<device>/, "
        "which git ignores), e.g. --output /tmp/run1"))
    if pair_file:
        return ap
    ap.add_argument("--peaks", action="store_true", help="(re)measure this device's ceilings (copy GB/s, matmul "
                    "TFLOP/s per dtype, launch µs) and cache them in profiles/peaks/; alone, only that, e.g. --peaks")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"), help="print per-variant changes between "
                    "two results.json files, or two folders of several runs each (each variant's interval then spans "
                    "its runs': host-bound pairs move more between runs than within one); exit 1 on regressions, e.g. "
                    "--compare profiles/a/results.json profiles/b/results.json, or --compare before/ after/")
    ap.add_argument("--root", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)  # chapters elsewhere (tests)
    ap.add_argument("--no-report", action="store_true", help="print the comparison only; write no report (what "
                    "running a pair file does; a first run still caches the ceilings in profiles/peaks/), "
                    "e.g. --no-report --pair batched_gemm")
    return ap


def fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _shown(p: Path) -> str:
    p = Path(p).resolve()
    return str(p.relative_to(REPO_ROOT)) if p.is_relative_to(REPO_ROOT) else str(p)


def _stdout(cmd: list[str], timeout: float, cwd: Path | None = None) -> str | None:
    """cmd's stdout, stripped, or None where it cannot run (not installed) or times out."""
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit() -> str:
    if os.environ.get("GIT_COMMIT"):  # a copy of the tree without .git (a remote GPU machine) passes it in
        return os.environ["GIT_COMMIT"]
    sha = _stdout(["git", "rev-parse", "--short", "HEAD"], 10, REPO_ROOT)
    dirty = None if sha is None else _stdout(["git", "status", "--porcelain", "--untracked-files=no"], 10, REPO_ROOT)
    return "unknown" if dirty is None else (sha or "unknown") + ("-dirty" if dirty else "")


def driver_version() -> str | None:
    out = _stdout(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], 20)
    return out.splitlines()[0] if out else None


def device_info(device, peaks: dict) -> dict:
    info = {"name": peaks["device"], "type": device.type, "ceilings": peaks}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(sm_count=p.multi_processor_count, memory_gb=round(p.total_memory / 2**30, 1),
                    capability=f"{p.major}.{p.minor}")
    return info


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def new_run_dir(label: str) -> Path:
    """profiles/runs/<date>-<label>: the name a user's output gets unless told otherwise (not created)."""
    return RUNS_DIR / run_name(_slug(label))


def default_report_dir(label: str, now: dt.datetime | None = None) -> Path:
    """profiles/runs/<date>-<label>/, created here (-2, -3, ... when taken): two runs never share a folder."""
    return new_run_folder(_slug(label), runs=RUNS_DIR, now=now)


def prepare_output(outdir: Path, report: str | None = "results.json") -> str | None:
    """Create the report folder and prove it writable, before any pair runs; the complaint, or None. A folder
    that holds a report already (`report`; None: a script whose folder is the caller's to reuse) is refused: the
    new report would be mixed with the old one's files."""
    outdir = Path(outdir)
    if outdir.exists() and not outdir.is_dir():
        return f"--output {outdir}: exists and is not a folder; give a folder for the report"
    try:
        if report and (outdir / report).exists():  # its traces and figures would stay beside the new run's report
            return f"--output {outdir}: already holds a report (results.json); give a new folder, or remove that one"
        outdir.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=outdir).close()
    except OSError as e:
        return f"cannot write the report into {outdir}: {e.strerror or e}; choose another folder with --output DIR"
    return None


def pair_of(path: Path) -> tuple[int, str] | None:
    """(chapter, pair name) of a baseline or optimized file, or None when it belongs to no pair."""
    path = Path(path).resolve()
    if not (m := CHAPTER_DIR.match(path.parent.name)):
        return None
    for name, (base, opts) in pair_files(path.parent).items():
        if path in [p.resolve() for p in (base, *opts)]:
            return int(m.group(1)), name
    return None


@dataclasses.dataclass
class LoadFailed:
    """A selected pair whose files do not import or break the contract: it fails alone ("FAILED to load")."""
    chapter: int
    name: str
    folder: Path
    error: Exception

    @property
    def key(self) -> str:
        return f"ch{self.chapter}/{self.name}"

    @property
    def said(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"

    def record(self) -> dict:
        return pair_record(self.chapter, self.name, "?", status="failed", error=self.said, errors=[self.said])


def load_all(selection) -> list[Pair | LoadFailed]:
    """Each selected pair (discover.select's tuples), imported and checked, or what stopped it."""
    loaded = []
    for c, name, base, opts in selection:
        try:
            loaded.append(load_pair(c, name, base, opts))
        except Exception as e:
            loaded.append(LoadFailed(c, name, base.parent, e))
    return loaded


def _folder(p: Pair | LoadFailed) -> Path:
    return p.folder if isinstance(p, LoadFailed) else p.baseline.path.parent


def list_pairs(pairs: list[Pair | LoadFailed]) -> int:
    chapter = None
    for pair in pairs:
        if pair.chapter != chapter:
            readme = _folder(pair) / "README.md"
            title = (readme.read_text().splitlines() or [""])[0].lstrip("# ") if readme.exists() else ""
            print(f"ch{pair.chapter}  {title}")
            chapter = pair.chapter
        if isinstance(pair, LoadFailed):
            print(f"  {pair.name:24s} FAILED to load: {pair.said}")
            continue
        print(f"  {pair.name:24s} [{pair.bound}, {'/'.join(pair.devices)}] {pair.baseline.summary}")
        if pair.sweep:
            print(f"    sweeps {sweep_text(pair.sweep)}")
        for v in pair.variants:
            print(f"    {v.name:34s} {v.summary}")
    return 1 if any(isinstance(p, LoadFailed) for p in pairs) else 0


def sweep_text(sweep: dict) -> str:
    """What --sizes and --dtypes set in a pair: 'size (columns per row), dtype (float32, bfloat16)'."""
    parts = [f"size ({sweep['size']})"] if "size" in sweep else []
    return ", ".join(parts + [f"dtype ({', '.join(sweep['dtype'])})"] if "dtype" in sweep else parts)


def sweep_points(pairs: list[Pair | LoadFailed], sizes: list[int] | None, dtypes: list[str] | None,
                 named: bool) -> list[Pair | LoadFailed] | str:
    """--sizes/--dtypes: each pair that takes them becomes one entry per point (pair.at(point)), in the order
    sizes, then dtypes. A pair that does not take one, or not one of the dtypes, is left out of a chapter's
    sweep (said on stderr), and is bad input when named with --pair. The pairs, or the complaint."""
    if any(n <= 0 for n in sizes or []):
        return f"--sizes {min(sizes)}: a size is a positive count"
    given = {k: list(dict.fromkeys(v)) for k, v in (("size", sizes), ("dtype", dtypes)) if v}  # each point once
    points = [dict(zip(given, combo)) for combo in itertools.product(*given.values())]
    out, left_out, take_none = [], [], []
    for pair in pairs:
        if isinstance(pair, LoadFailed):  # it fails alone, as in any run
            out.append(pair)
            continue
        lacks = [f"--{k}s" for k in given if k not in pair.sweep]
        takes = [p for p in points if "dtype" not in p or p["dtype"] in pair.sweep.get("dtype", ())]
        if lacks or len(takes) < len(points):
            why = (f"takes no {' or '.join(lacks)}" if lacks else
                   f"takes only the dtypes {', '.join(pair.sweep['dtype'])}")
            if named:
                return f"{pair.key} {why}" + (f" (it sweeps {sweep_text(pair.sweep)})" if pair.sweep else "")
            if lacks:
                take_none.append(pair.key)
                continue
            dropped = sorted({p["dtype"] for p in points} - {p["dtype"] for p in takes})
            left_out.append(f"{pair.key} at {', '.join(dropped)} (it {why})")
        out += [pair.at(point) for point in takes]
    if take_none:  # most pairs, in a chapter's sweep: counted, not listed
        left_out.insert(0, f"{len(take_none)} pair(s) whose baseline's SWEEP does not take " +
                        " and ".join(f"--{k}s" for k in given) + " (--list says what each pair sweeps)")
    if not out:
        return "nothing to sweep: " + "; ".join(left_out)
    if left_out:
        print(f"left out of the sweep: {'; '.join(left_out)}", file=sys.stderr)
    return out


def compare(paths: list[Path]) -> int:
    """--compare OLD NEW: each a results.json, or a folder whose results.json files (at any depth) are several
    runs of that side (common.report.merge_runs)."""
    sides = []
    for p in paths:
        files = sorted(Path(p).rglob("results.json")) if Path(p).is_dir() else [p]
        docs = [read_results(f) for f in files]
        if not docs or any(isinstance(d, str) for d in docs):
            return fail(next((d for d in docs if isinstance(d, str)), f"{p}: a folder with no results.json in it"))
        sides.append(docs)
    try:
        text, regressions = compare_runs(merge_runs(sides[0], worst=False), merge_runs(sides[1]))
    except CompareRefused as e:  # quick vs full, different devices, ...
        return fail(f"cannot compare {paths[0]} with {paths[1]}: {e}")
    print(text)
    return 1 if regressions else 0


def main(argv=None, pair_file: Path | None = None) -> int:
    """benchmark.py's (or, given `pair_file`, that file's) command line; returns the exit status."""
    try:
        return _main(list(sys.argv[1:] if argv is None else argv), pair_file)
    except KeyboardInterrupt:  # outside the pairs (imports, checks, a Ctrl-C held while the report was written)
        print("\ninterrupted (SIGINT)", file=sys.stderr)
        return 128 + signal.SIGINT


def _main(argv: list[str], pair_file: Path | None) -> int:
    parsed = _parse(argv, pair_file)
    if isinstance(parsed, int):
        return parsed
    args, command = parsed
    if args.compare:
        ignored = [f"--{name}" for name in ("chapter", "pair", "list", "peaks", "sizes", "dtypes", "output", "profile")
                   if getattr(args, name)]
        if ignored:   # they were ignored without a word: --compare --pair x printed every pair's rows
            return fail(f"--compare reads two runs and runs nothing, so it takes no {', '.join(ignored)}")
        return compare(args.compare)
    if args.profile and args.no_report:
        return fail(f"--profile {args.profile} writes its traces next to the report; drop --no-report")
    only_peaks = args.peaks and not (args.chapter or args.pair)
    pairs = []
    if not only_peaks:
        try:
            pairs = load_all(select(args.chapter, args.pair, root=args.root))
        except UnknownSelection as e:
            return fail(str(e))
        if args.list:
            return list_pairs(pairs)
        if args.sizes or args.dtypes:
            swept = sweep_points(pairs, args.sizes, args.dtypes, named=bool(args.pair))
            if isinstance(swept, str):
                return fail(swept)
            pairs = swept
    device = _device_for(args, pairs)
    if isinstance(device, str):
        return fail(device)
    outdir, created = None, False
    if not (args.no_report or only_peaks):
        created = not (args.output and args.output.exists())
        outdir = args.output or default_report_dir(ceilings.device_name(device))
        problem = prepare_output(outdir)
        if problem:
            return fail(problem)
    stamp = dt.datetime.now(dt.timezone.utc)
    results: list[dict] = []
    peaks, interrupted = _run_all(args, pairs, device, outdir, results, only_peaks)
    if only_peaks and not interrupted:
        print(json.dumps(peaks, indent=2))
        return 0
    return _report(args, command, pairs, device, peaks, outdir, created, stamp, results, interrupted)


def _parse(argv: list[str], pair_file: Path | None):
    """(args, the command as typed), or an exit status for a bad command line."""
    refused = [f for f in (a.split("=", 1)[0] for a in argv) if f in NOT_FOR_A_PAIR_FILE] if pair_file else []
    if refused:
        return fail(f"{refused[0]} is an option of benchmark.py; python {_shown(pair_file)} runs only its own pair "
                    f"(see --help; for others: python benchmark.py {refused[0]} ...)")
    parser = build_parser(pair_file)
    args = parser.parse_args(argv)
    if pair_file:
        owner = pair_of(pair_file)
        if owner is None:
            return fail(f"{_shown(pair_file)} belongs to no pair: a pair is baseline_<pair>.py; {VARIANT_RULE}")
        args.chapter, args.pair = [owner[0]], [f"ch{owner[0]}/{owner[1]}"]
        args.list, args.peaks, args.compare = False, False, None
        args.root = Path(pair_file).resolve().parent.parent
        args.no_report = args.output is None and not args.profile  # profiler traces need a folder
    return args, f"{parser.prog} {' '.join(argv)}".strip()


def _device_for(args, pairs):
    """The device to run on, or the one-line reason this machine cannot run what was asked."""
    if args.device == "cuda" and not torch.cuda.is_available():
        return "--device cuda: no CUDA GPU is visible to PyTorch"
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.profile in TOOL_PROFILERS and device.type != "cuda":
        return f"--profile {args.profile} needs a CUDA GPU"
    if missing := tool_missing(args.profile):
        return missing
    if args.pair:  # a pair asked for by name that cannot run here is bad input, not a skip
        for pair in (p for p in pairs if isinstance(p, Pair)):
            if device.type not in pair.devices:
                return (f"{pair.key} needs a CUDA GPU and none is visible to PyTorch"
                        if pair.devices == ("cuda",) else f"{pair.key} cannot run on {device.type}")
            why = pair.cannot_run(device.type, gpus_visible(device))
            if why and "GPUs" in why:
                return f"{pair.key} {why}"
    return device


def gpus_visible(device) -> int:
    return torch.cuda.device_count() if device.type == "cuda" else 0


def _run_all(args, pairs, device, outdir, results, only_peaks):
    """Ceilings, then every pair; returns (ceilings, the signal that stopped the run or None)."""
    previous = peaks = None
    with contextlib.suppress(ValueError):  # not the main thread: SIGTERM keeps its default
        previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        peaks = ceilings.load_or_measure(device, refresh=args.peaks, log=lambda m: print(m, file=sys.stderr))
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if not only_peaks:
            _run_pairs(pairs, device, peaks, args, outdir, results)
        return peaks, None
    except (KeyboardInterrupt, Interrupted) as e:
        return peaks, getattr(e, "signum", signal.SIGINT)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _report(args, command, pairs, device, peaks, outdir, created, stamp, results, interrupted) -> int:
    """Write (or print) the report of what finished, and the exit status."""
    if interrupted:
        print(f"\ninterrupted ({signal.Signals(interrupted).name}): stopped the running pair; "
              f"{len(results)} of {len(pairs)} pair(s) finished", file=sys.stderr)
        if not results:
            if outdir and created and not any(outdir.iterdir()):
                outdir.rmdir()
            print("nothing finished; no report written", file=sys.stderr)
            return 128 + interrupted
    doc = {"schema_version": SCHEMA_VERSION, "device": device_info(device, peaks), "host": host_info(),
           "topology": _topology(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "driver": driver_version(), "git_commit": git_commit(),
           "created": stamp.isoformat(timespec="seconds"), "quick": args.quick, "command": command,
           "pairs": results}
    if interrupted:
        done = {(r["chapter"], r["name"]) for r in results}
        doc.update(interrupted=True, not_run=[p.key for p in pairs if (p.chapter, p.name) not in done])
    # a Ctrl-C or SIGTERM now would leave the Markdown without its results.json: held until the report is whole and
    # where it is has been said
    with signals_deferred() as held:
        written = None if outdir is None else write_report(doc, outdir)
        print(summary_markdown(doc))
        if written is not None:
            print("wrote " + ", ".join(_shown(p) for p in written), file=sys.stderr)
        if held:
            acts = next(s for s in (signal.SIGTERM, signal.SIGINT) if s in held)  # SIGTERM's default ends the run
            print(f"{signal.Signals(acts).name} came while the report was written: written whole, now stopping",
                  file=sys.stderr)
    if interrupted:
        return 128 + interrupted
    suspect = [f"ch{r['chapter']}/{r['name']}" for r in results if r.get("suspect")]
    if suspect:
        print(f"SUSPECT results in {', '.join(suspect)}: not presented as speedups (see the report)", file=sys.stderr)
        _drop_beaten_ceilings(results, device)
    return 1 if suspect or any(r["status"] == "failed" for r in results) else 0


def _drop_beaten_ceilings(results: list[dict], device) -> None:
    """The physics check's rule, applied to the ceilings: a verified result that beat its floor by more than 10%
    may mean the cached ceilings were measured on a busy machine, so the cache is dropped and measured again."""
    beaten = [v for r in results for v in [r.get("baseline") or {}] + r.get("variants", [])
              if "floor its workload implies" in (v.get("suspect") or "")]
    if beaten:
        ceilings.invalidate(ceilings.peaks_path(device), f"{len(beaten)} verified result(s) beat the floor they imply",
                   log=lambda m: print(m, file=sys.stderr))


def _topology() -> str | None:
    """How the GPUs are linked (`nvidia-smi topo -m`), where there are several."""
    if torch.cuda.is_available() and torch.cuda.device_count() > 1:
        return _stdout(["nvidia-smi", "topo", "-m"], 20)
    return None


def _run_pairs(pairs: list, device, peaks: dict, args, outdir: Path | None, results: list[dict]) -> None:
    """Run each pair in its own process, appending to `results` as each one finishes (an interrupt keeps them).
    Each worker's interpreter and torch import overlap the extensions' build or the pair before it (Spares)."""
    n = len(pairs)
    print(f"{n} pair(s) on {peaks['device']} ({device.type})" + (", quick" if args.quick else ""), file=sys.stderr)
    started = time.monotonic()
    gpus = gpus_visible(device)
    why_not = [None if isinstance(p, LoadFailed) else p.cannot_run(device.type, gpus) for p in pairs]
    runs_here = [isinstance(p, Pair) and why is None for p, why in zip(pairs, why_not)]
    # The pairs that start a plain worker (one process, no profiler wrapped around it) can take a spare.
    takes_spare = [ok and p.nproc == 1 and args.profile not in TOOL_PROFILERS for ok, p in zip(runs_here, pairs)]
    spares = Spares([_folder(p).parent for p in pairs], takes_spare, device.type)
    decided = dict(peaks=peaks, quick=args.quick, budget_s=args.budget or (QUICK_BUDGET_S if args.quick else BUDGET_S),
                   profile=args.profile, outdir=str(outdir) if outdir else None)
    try:
        spares.start(-1)  # imports while the kernels build
        if device.type == "cuda":
            _build_ahead([v.path for p, ok in zip(pairs, runs_here) if ok for v in [p.baseline, *p.variants]], device)
        for i, pair in enumerate(pairs):
            tag = f"[{i + 1}/{n}] {pair.key}"
            if isinstance(pair, LoadFailed):  # a file that does not import or breaks the contract fails alone
                results.append(pair.record())
                print(f"{tag}: FAILED to load: {pair.error}", file=sys.stderr)
            elif why_not[i]:  # no process, no timeout
                results.append(pair_record(pair.chapter, pair.name, pair.bound, status="skipped", error=why_not[i],
                                           device_type=device.type, **pair.point_fields))
                print(f"{tag}: skipped: {why_not[i]}", file=sys.stderr)
            else:
                print(f"{tag} ({pair.bound}-bound, {1 + len(pair.variants)} variants)", file=sys.stderr)
                results.append(_run_one(RunSpec.of(pair, device.type, **decided), pair, i, spares, args.timeout))
                print(f"    {tag}: {results[-1].get('elapsed_s', 0):.1f} s wall" + _stages_text(results[-1]),
                      file=sys.stderr)
    finally:
        spares.discard()
    print(f"{n} pair(s) in {time.monotonic() - started:.1f} s", file=sys.stderr)


def _build_ahead(files: list[Path], device) -> None:
    """Every CUDA extension the pairs load, compiled at once before the first pair starts (common.cuda_ext)."""
    try:
        build_declared(files, torch.cuda.get_device_capability(device), log=lambda m: print(m, file=sys.stderr))
    except Exception as e:  # noqa: BLE001 - best effort: each pair's worker still builds what it needs
        print(f"building the CUDA extensions ahead failed ({type(e).__name__}: {e}); each pair builds its own",
              file=sys.stderr)


class Spares:
    """The next pair's worker, started ahead (common.launch.Spare) for the first later pair that takes one;
    `roots`: the folder that holds each pair's chapter; with `device`, its worker's environment."""
    def __init__(self, roots: list[Path], takes: list[bool], device: str):
        self.roots, self.takes, self.device, self.spare = roots, takes, device, None

    def start(self, after: int) -> None:
        later = next((r for r, ok in zip(self.roots[after + 1:], self.takes[after + 1:]) if ok), None)
        if self.spare is None and later is not None:
            self.spare = Spare(worker_env(self.device, later))

    def take(self, i: int) -> Spare | None:
        """The spare, for pair i if it takes one (the next pair that does gets a new one)."""
        mine, self.spare = (self.spare, None) if self.takes[i] else (None, self.spare)
        return mine

    def discard(self) -> None:
        if self.spare is not None:
            self.spare.discard()


def _run_one(spec: RunSpec, pair, i: int, spares: Spares, timeout_s: float) -> dict:
    """One pair in its own process (common.launch); the next pair's spare starts while this one is timed by CUDA
    events on the GPU (an import on another core moves no event), or once its rounds are over where the host's
    clock or the host's issuing is timed."""
    early = spec.device == "cuda" and pair.bound in ("memory", "compute")

    def ahead(stage: str) -> None:
        if stage in (*SPARE_AFTER, "exited") or (early and stage == "started"):
            spares.start(i)
    mine = spares.take(i)
    try:
        r = run_in_subprocess(spec, timeout_s=timeout_s, spare=mine, on_stage=ahead)
    except BaseException:
        if mine is not None and mine.proc.stdin and not mine.proc.stdin.closed:  # never handed the pair
            mine.discard()
        raise
    if r["status"] == "failed":
        print(f"    FAILED: {r.get('error') or 'a variant failed; see the report'}", file=sys.stderr)
    r.update(pair.point_fields)  # also where the worker never wrote its result
    return r


def _stages_text(r: dict) -> str:
    """Where a pair's wall time went: the worker's start (interpreter, imports, CUDA), the reference workload,
    then each step summed over the baseline and its variants (prepare, verify, timed rounds, checks, profile)."""
    parts = [f"start {r['startup_s']:.1f}"] if r.get("startup_s") is not None else []
    if r.get("setup_s") is not None:
        parts.append(f"workload {r['setup_s']:.1f}")
    steps: dict[str, float] = {}
    for e in [r.get("baseline") or {}] + list(r.get("variants") or []):
        for name, s in (e.get("steps_s") or {}).items():
            steps[name] = steps.get(name, 0.0) + s
        if e.get("timed_s"):
            steps["timed rounds"] = steps.get("timed rounds", 0.0) + e["timed_s"]
    parts += [f"{name} {s:.1f}" for name, s in steps.items() if s >= 0.05]
    return f" ({', '.join(parts)} s)" if parts else ""


def run_pair_file(path: str, argv=None) -> None:
    """What `python chN/baseline_x.py` (or an optimized file) does: run that file's pair, print the comparison."""
    sys.exit(main(argv, pair_file=Path(path).resolve()))
