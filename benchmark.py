#!/usr/bin/env python3
"""Run the chapters' baseline/optimized pairs: verify, time, report.

Examples
  python benchmark.py                      every chapter, report under profiles/<date>-<gpu>/
  python benchmark.py --chapter 1          one chapter
  python benchmark.py --pair batched_gemm  one pair (or ch1/batched_gemm)
  python benchmark.py --list               chapters, pairs and variants, one line each
  python benchmark.py --quick --chapter 1  a short smoke run (small sizes, short time budget)
  python benchmark.py --peaks              measure this device's ceilings and cache them
  python benchmark.py --profile torch --pair cuda_graphs
                                           add a torch.profiler trace of each variant
  python benchmark.py --compare profiles/A/results.json profiles/B/results.json

Exit status: 0 all verified, 1 something failed (the report says what), 2 bad input.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class ArgParser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as for every other bad input
        print(f"error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    ap = ArgParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n", 2)[2],
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chapter", type=int, action="append", metavar="N",
                    help="run chapter N (repeatable), e.g. --chapter 1; default: every chapter")
    ap.add_argument("--pair", action="append", metavar="NAME",
                    help="run one pair, by name or chN/name (repeatable), e.g. --pair batched_gemm")
    ap.add_argument("--list", action="store_true",
                    help="list chapters, pairs and variants with a line each, then exit, e.g. --list --chapter 11")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: each pair's small size and a 0.3 s timing budget per variant, "
                         "e.g. --quick --chapter 1")
    ap.add_argument("--output", type=Path, metavar="DIR",
                    help="report folder (default: a new folder profiles/<date>-<device>/), e.g. --output /tmp/run1")
    ap.add_argument("--profile", choices=("torch", "nsys", "ncu"),
                    help="also profile each variant's timed call: torch.profiler trace (Chrome/Perfetto JSON), "
                         "or an nsys / ncu report, written next to results.json, e.g. --profile torch --pair cuda_graphs")
    ap.add_argument("--peaks", action="store_true",
                    help="(re)measure this device's ceilings (copy GB/s, matmul TFLOP/s per dtype, launch µs) and "
                         "cache them in profiles/peaks/; alone, only that, e.g. --peaks")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("OLD.json", "NEW.json"),
                    help="print per-variant changes between two results.json files; exit 1 on regressions, "
                         "e.g. --compare profiles/a/results.json profiles/b/results.json")
    ap.add_argument("--device", choices=("cuda", "cpu"),
                    help="default: cuda when a GPU is visible, else cpu, e.g. --device cpu to try the CPU paths")
    ap.add_argument("--budget", type=float, metavar="S",
                    help="timing budget per variant in seconds (default 2, --quick 0.3), e.g. --budget 5")
    ap.add_argument("--timeout", type=float, default=600, metavar="S",
                    help="kill a pair's process after S seconds and record it as failed (default 600), e.g. --timeout 120")
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)  # chapters elsewhere (tests)
    ap.add_argument("--no-report", action="store_true",
                    help="print the comparison only; write no files (what running a pair file does), e.g. --no-report --pair batched_gemm")
    return ap


def fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def git_commit() -> str:
    if os.environ.get("GIT_COMMIT"):  # a copy of the tree without .git (a remote GPU machine) passes it in
        return os.environ["GIT_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (sha or "unknown") + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def driver_version() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        return out.splitlines()[0] if out else None
    except (OSError, subprocess.SubprocessError):
        return None


def device_info(device, peaks: dict) -> dict:
    import torch
    info = {"name": peaks["device"], "type": device.type, "ceilings": peaks}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(sm_count=p.multi_processor_count, memory_gb=round(p.total_memory / 2**30, 1),
                    capability=f"{p.major}.{p.minor}")
    return info


def list_pairs(selection) -> None:
    from common.discover import load_pair
    chapter = None
    for c, name, base, opts in selection:
        if c != chapter:
            readme = base.parent / "README.md"
            title = readme.read_text().splitlines()[0].lstrip("# ") if readme.exists() else ""
            print(f"ch{c}  {title}")
            chapter = c
        pair = load_pair(c, name, base, opts)
        print(f"  {name:24s} [{pair.bound}, {'/'.join(pair.devices)}] {pair.baseline.summary}")
        for v in pair.variants:
            print(f"    {v.name:34s} {v.summary}")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from common.discover import UnknownSelection, chapter_dirs, select
    from common.report import compare_runs, validate_results, write_report, summary_markdown

    if args.compare:
        docs = []
        for p in args.compare:
            try:
                docs.append(json.loads(p.read_text()))
            except (OSError, json.JSONDecodeError) as e:
                return fail(f"cannot read {p}: {e}")
            if validate_results(docs[-1]):
                return fail(f"{p} is not a results.json: {validate_results(docs[-1])[0]}")
        text, regressions = compare_runs(*docs)
        print(text)
        return 1 if regressions else 0

    try:
        selection = select(args.chapter, args.pair, root=args.root)
    except UnknownSelection as e:
        return fail(str(e))
    if args.list:
        list_pairs(selection)
        return 0

    from common.launch import run_in_subprocess, tool_missing
    from common.peaks import load_or_measure, peaks_path
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        return fail("--device cuda: no CUDA GPU is visible to PyTorch")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.profile in ("nsys", "ncu") and device.type != "cuda":
        return fail(f"--profile {args.profile} needs a CUDA GPU")
    missing = tool_missing(args.profile)
    if missing:
        return fail(missing)

    only_peaks = args.peaks and not (args.chapter or args.pair)
    peaks = load_or_measure(device, refresh=args.peaks, log=lambda m: print(m, file=sys.stderr))
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if only_peaks:
        print(json.dumps(peaks, indent=2))
        return 0

    if args.pair:  # a pair asked for by name that cannot run here is bad input, not a skip
        from common.discover import load_pair
        for c, name, base, opts in selection:
            devices = load_pair(c, name, base, opts).devices
            if device.type not in devices:
                return fail(f"ch{c}/{name} needs a CUDA GPU and none is visible to PyTorch"
                            if devices == ("cuda",) else f"ch{c}/{name} cannot run on {device.type}")

    budget = args.budget or (0.3 if args.quick else 2.0)
    stamp = dt.datetime.now(dt.timezone.utc)
    slug = re.sub(r"[^a-z0-9]+", "-", peaks["device"].lower()).strip("-")
    outdir = args.output or ROOT / "profiles" / f"{stamp:%Y%m%d-%H%M%S}-{slug}"
    if args.profile:
        outdir.mkdir(parents=True, exist_ok=True)

    results = []
    print(f"{len(selection)} pair(s) on {peaks['device']} ({device.type})"
          + (", quick" if args.quick else ""), file=sys.stderr)
    for i, (c, name, base, opts) in enumerate(selection, 1):
        from common.discover import load_pair
        try:
            pair = load_pair(c, name, base, opts)
            bound, nproc = pair.bound, pair.nproc
        except Exception as e:  # a file that does not import or breaks the contract fails alone
            results.append({"chapter": c, "name": name, "bound": "?", "status": "failed",
                            "error": f"{type(e).__name__}: {e}", "baseline": None, "variants": []})
            print(f"[{i}/{len(selection)}] ch{c}/{name}: FAILED to load: {e}", file=sys.stderr)
            continue
        print(f"[{i}/{len(selection)}] ch{c}/{name} ({bound}-bound, {1 + len(opts)} variants)", file=sys.stderr)
        r = run_in_subprocess(c, name, bound, base, opts, device=device.type, peaks=peaks_path(device),
                              quick=args.quick, budget=budget, timeout_s=args.timeout, nproc=nproc,
                              profile=args.profile, outdir=None if args.no_report else outdir)
        if r["status"] == "failed":
            print(f"    FAILED: {r.get('error') or 'a variant failed; see the report'}", file=sys.stderr)
        results.append(r)

    doc = {"schema_version": 1, "device": device_info(device, peaks), "torch": torch.__version__,
           "cuda": torch.version.cuda, "driver": driver_version(), "git_commit": git_commit(),
           "created": stamp.isoformat(timespec="seconds"), "quick": args.quick,
           "command": "python benchmark.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "pairs": results}
    if args.no_report:
        print(summary_markdown(doc))
    else:
        written = write_report(doc, outdir)
        print(summary_markdown(doc))
        print("wrote " + ", ".join(str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p) for p in written),
              file=sys.stderr)
    failed = [r for r in results if r["status"] == "failed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
