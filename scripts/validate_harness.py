#!/usr/bin/env python3
"""Check the harness's timer against two independent ones on this GPU.

    python scripts/validate_harness.py --out profiles/h100/harness-<commit> [--pairs ch1/coalescing ...]

1. Pairs: for each variant of seven chapter 1 pairs (default; each call 0.1-25 ms), the median the
   harness reports (`common.run.run_pair`, as `benchmark.py` runs it: verified, fed new
   values, timed in rounds beside its baseline) against
     - triton.testing.do_bench(fn, return_mode="median"): one call per pair of events,
       L2 cleared before each call;
     - a plain CUDA-event loop: N calls back to back between two events (N for >= 200 ms),
       the median of five such loops.
   The last two run twice each, alternated, on one prepared copy of the variant's workload,
   in the variant's numerics flags. Target: both within 3% of the harness for every variant of
   at least five pairs; a variant outside it must show the SM clock dropping under the
   back-to-back load (the GPU at its power cap), with the clocks in the report.
2. Launch-bound calls (a 1-element add, a bmm of 40 128x128 matrices): the harness's
   per-call median against 1000 calls between two device syncs. Target: within 10%.

Writes harness_validation.json and harness_validation.md into --out; exits 1 if a check misses.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from common.files import atomic_write, atomic_write_json  # noqa: E402
from common.numerics import numerics  # noqa: E402
from common.timing import loop_ms, time_call  # noqa: E402

DEV = torch.device("cuda")
PAIRS = ["ch1/coalescing", "ch1/double_buffering", "ch1/fused_gelu", "ch1/launch_bounds", "ch1/smem_prefetch",
         "ch1/tensor_cores", "ch1/vectorization"]
TARGET_PCT = 3.0
AGREEING_PAIRS = 5       # pairs whose every variant must agree within TARGET_PCT
CLOCK_DROP = 0.95        # a sustained SM clock below this share of the harness's: the GPU is at its power cap


def event_loop_ms(fn, min_ms: float = 200.0, loops: int = 5) -> float:
    """Milliseconds per call: N back-to-back calls between two CUDA events, the median of `loops` loops."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    n = max(10, int(min_ms / max(start.elapsed_time(end), 1e-3)))
    per_call = []
    for _ in range(loops):
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / n)
    return statistics.median(per_call)


def check_pairs(pairs: list[str], budget_s: float, peaks: dict | None) -> list[dict]:
    import triton.testing

    from common.discover import load_pair, select
    from common.inputs import SEEDS
    from common.run import run_pair
    from common.timing import gpu_state

    rows = []
    for chapter, name, base, opts in select(pairs=pairs):
        pair = load_pair(chapter, name, base, opts)
        print(f"{pair.key}: the harness (benchmark.py's run_pair)", file=sys.stderr)
        result = run_pair(pair, DEV, budget_s=budget_s, peaks=peaks)
        entries = {e["name"]: e for e in [result["baseline"]] + result["variants"]}
        torch.cuda.empty_cache()
        for v in [pair.baseline] + pair.variants:
            e = entries.get(v.name, {})
            if not e.get("verified"):
                rows.append({"pair": pair.key, "variant": v.name, "harness_ms": None,
                             "error": e.get("error") or e.get("skipped") or "not verified", "pass": False})
                continue
            print(f"  {v.name}: do_bench and an event loop, alternated", file=sys.stderr)
            w = pair.workload(seed=SEEDS[0], device=DEV, quick=False)
            tf32 = v.precision == "tf32" or (v.precision is None and w.precision == "tf32")
            with numerics("tf32" if tf32 else None):  # the flags the harness runs the variant in
                fn = v.prepare(w)
                loop, bench, clocks = [], [], []
                for _ in range(2):
                    loop.append(event_loop_ms(fn))
                    bench.append(triton.testing.do_bench(fn, warmup=100, rep=500, return_mode="median"))
                    clocks.append((gpu_state(DEV) or {}).get("sm_clock_mhz"))
            del fn, w
            torch.cuda.empty_cache()
            h = e["median_ms"]
            row = {"pair": pair.key, "variant": v.name, "harness_ms": h,
                   "harness_p10_p90_ms": [e.get("p10_ms"), e.get("p90_ms")],
                   "harness_samples": e.get("samples"), "calls_per_sample": e.get("calls_per_sample"),
                   "harness_sm_mhz": (e.get("gpu_state") or {}).get("sm_clock_mhz"),
                   "harness_power_w": (e.get("gpu_state") or {}).get("power_w"),
                   "do_bench_ms": statistics.mean(bench), "do_bench_runs_ms": bench,
                   "event_loop_ms": statistics.mean(loop), "event_loop_runs_ms": loop, "sm_mhz_after_each": clocks}
            row["do_bench_diff_pct"] = 100 * (row["do_bench_ms"] - h) / h
            row["event_loop_diff_pct"] = 100 * (row["event_loop_ms"] - h) / h
            row["pass"] = max(abs(row["do_bench_diff_pct"]), abs(row["event_loop_diff_pct"])) <= TARGET_PCT
            sustained = [c for c in clocks if c]
            row["clock_drop"] = bool(sustained and row["harness_sm_mhz"]
                                     and max(sustained) < CLOCK_DROP * row["harness_sm_mhz"])
            rows.append(row)
            print(f"    harness {h:.4f} ms, do_bench {row['do_bench_ms']:.4f} ({row['do_bench_diff_pct']:+.2f}%), "
                  f"event loop {row['event_loop_ms']:.4f} ({row['event_loop_diff_pct']:+.2f}%)", file=sys.stderr)
    return rows


def check_launch(rounds: int = 2) -> list[dict]:
    """Alternate the harness and the by-hand batch: host-bound timings drift with the host's state."""
    g = torch.Generator(device=DEV).manual_seed(0)
    tiny = torch.randn(1, device=DEV, generator=g)
    p = torch.randn(40, 128, 128, device=DEV, generator=g)
    rows = []
    for name, fn in (("add_1_element", lambda: tiny.add_(1.0)), ("bmm_40x128", lambda: torch.bmm(p, p))):
        ours, hand, calls = [], [], 0
        for _ in range(rounds):
            t = time_call(fn, DEV, budget_s=2.0)
            ours.append(t.median_ms)
            calls = t.calls_per_sample
            hand.append(statistics.median(loop_ms(fn, DEV, calls=1000) for _ in range(5)))
        o, h = statistics.mean(ours), statistics.mean(hand)
        rows.append({"call": name, "harness_ms": o, "calls_per_sample": calls, "by_hand_1000_calls_ms": h,
                     "harness_rounds_ms": ours, "by_hand_rounds_ms": hand,
                     "diff_pct": 100 * (o - h) / h, "target_pct": 10.0, "pass": abs(o - h) / h <= 0.10})
    return rows


def _ms(x) -> str:
    return "–" if x is None else f"{x:.4g}"


def markdown(doc: dict) -> str:
    L = [f"# Harness validation on {doc['device']}", "",
         f"torch {doc['torch']}, commit `{doc['git_commit']}`, created {doc['created']}", "",
         "## 1. Five pairs: the harness's median vs triton.testing.do_bench (median) vs a plain CUDA-event loop", "",
         "The harness: `run_pair` as `benchmark.py` runs it (verified, new values fed between calls, L2 scrubbed for "
         "memory-bound pairs, timed in rounds beside the baseline). do_bench: one call per pair of events, L2 cleared "
         "before each. Event loop: N back-to-back calls between two events (>= 200 ms), median of five loops. "
         "do_bench and the loop run twice each, alternated, on one prepared copy of the workload.", "",
         "| pair | variant | harness ms (p10–p90) | do_bench ms (runs) | event loop ms (runs) | do_bench vs harness | "
         "loop vs harness | within 3% | SM MHz: harness; after each other run |",
         "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in doc["pairs"]:
        if r.get("harness_ms") is None:
            L.append(f"| {r['pair']} | {r['variant']} | {r.get('error')} | | | | | NO | |")
            continue
        p10, p90 = r["harness_p10_p90_ms"]
        verdict = "yes" if r["pass"] else "no: the clock dropped" if r["clock_drop"] else "NO"
        L.append(f"| {r['pair']} | {r['variant']} | {r['harness_ms']:.4g} ({_ms(p10)}–{_ms(p90)}) | "
                 f"{r['do_bench_ms']:.4g} ({', '.join(f'{x:.4g}' for x in r['do_bench_runs_ms'])}) | "
                 f"{r['event_loop_ms']:.4g} ({', '.join(f'{x:.4g}' for x in r['event_loop_runs_ms'])}) | "
                 f"{r['do_bench_diff_pct']:+.2f}% | {r['event_loop_diff_pct']:+.2f}% | {verdict} | "
                 f"{r['harness_sm_mhz']}; {', '.join(str(c) for c in r['sm_mhz_after_each'])} |")
    agree = agreeing(doc["pairs"])
    L += ["", f"Pairs whose every variant agrees within {TARGET_PCT:g}%: {len(agree)} ({', '.join(agree) or 'none'}); "
          f"required: {AGREEING_PAIRS}. A row marked 'the clock dropped' ran back to back at a lower SM clock than the "
          f"harness's rounds (below {CLOCK_DROP:.0%} of it): the GPU at its power cap."]
    L += ["", "## 2. Launch-bound: per-call median vs 1000 calls timed by hand (two device syncs), alternated", "",
          "| call | harness ms (rounds) | calls per sample | by hand ms (rounds) | difference of means | within 10% |",
          "| --- | ---: | ---: | ---: | ---: | --- |"]
    L += [f"| {r['call']} | {r['harness_ms']:.5f} ({', '.join(f'{x:.5f}' for x in r['harness_rounds_ms'])}) | "
          f"{r['calls_per_sample']} | {r['by_hand_1000_calls_ms']:.5f} ({', '.join(f'{x:.5f}' for x in r['by_hand_rounds_ms'])}) | "
          f"{r['diff_pct']:+.2f}% | {'yes' if r['pass'] else 'NO'} |" for r in doc["launch"]]
    L.append("")
    return "\n".join(L)


def agreeing(rows: list[dict]) -> list[str]:
    pairs = sorted({r["pair"] for r in rows})
    return [p for p in pairs if all(r["pass"] for r in rows if r["pair"] == p)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Needs a CUDA GPU and Triton. Takes about 3 minutes on an H100.")
    ap.add_argument("--out", type=Path, required=True, help="folder for harness_validation.json and .md")
    ap.add_argument("--pairs", nargs="+", default=PAIRS, help=f"pairs to check (default: {' '.join(PAIRS)})")
    ap.add_argument("--budget", type=float, default=2.0, help="the harness's timing budget per variant, s (default 2)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("error: validate_harness.py needs a CUDA GPU", file=sys.stderr)
        return 2
    try:
        import triton.testing  # noqa: F401
    except ImportError:
        print("error: validate_harness.py needs Triton (pip install triton)", file=sys.stderr)
        return 2
    from common.cli import git_commit
    from common.peaks import peaks_path
    from common.discover import UnknownSelection, select
    try:
        select(pairs=a.pairs)
    except UnknownSelection as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cached = peaks_path(DEV)
    peaks = json.loads(cached.read_text()) if cached.exists() else None
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "git_commit": git_commit(),
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    doc["pairs"] = check_pairs(a.pairs, a.budget, peaks)
    doc["launch"] = check_launch()
    a.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(a.out / "harness_validation.json", doc)
    atomic_write(a.out / "harness_validation.md", [markdown(doc)])
    print(markdown(doc))
    unexplained = [r for r in doc["pairs"] if not r["pass"] and not r.get("clock_drop")]
    ok = len(agreeing(doc["pairs"])) >= min(AGREEING_PAIRS, len({r["pair"] for r in doc["pairs"]})) and not unexplained
    return 0 if ok and all(c["pass"] for c in doc["launch"]) else 1


if __name__ == "__main__":
    sys.exit(main())
