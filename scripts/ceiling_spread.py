#!/usr/bin/env python3
"""How far apart two timings of one large bf16 product land on this GPU: the ceiling's burst, and a plain loop.

    python scripts/ceiling_spread.py [--trials 4] [--json OUT]

tests/test_ceilings_gpu.py asserts that a plain loop of 8192^3 bf16 products (best of three bursts of 50 calls, 10
warm-up calls before each) does not beat the cached ceiling (common.peaks: a 1 s pause, then the best of three
bursts of 50 calls, 5 warm-up calls before each) by more than its noise allowance. On an H100 an event-timed plain
loop (the test's loop then) once read 786 TFLOP/s against a ceiling of 754 measured a minute before. This times
both ways with CUDA events (common.peaks.burst_ms; "plain loop" is that event-timed loop, 10 warm-up calls; the
test's own loop now uses the host clock, which by construction reads a burst no faster), in turn, from two states
of the chip: after 1 s idle, and right after 2 s of the same product back to back (a hot, power-capped chip), with
the SM clock read (NVML) after each. GPU only.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402

from common.peaks import burst_ms  # noqa: E402
from common.timing import gpu_state  # noqa: E402

N = 8192


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--json")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: needs a CUDA GPU")
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(N, N, device=dev, dtype=torch.bfloat16, generator=g)
    y = torch.randn(N, N, device=dev, dtype=torch.bfloat16, generator=g)
    layouts = {"A·B": lambda: x @ y, "A·Bᵀ": lambda: x @ y.t()}
    ways = {"ceiling burst": lambda fn: burst_ms(fn, dev), "plain loop": lambda fn: burst_ms(fn, dev, warmup=10)}
    rows = []
    for trial in range(a.trials):
        for state in ("after 1 s idle", "after 2 s of load"):
            for layout, fn in layouts.items():
                for way, timer in ways.items():
                    if state == "after 1 s idle":
                        torch.cuda.synchronize()
                        time.sleep(1.0)
                    else:
                        end = time.perf_counter() + 2.0
                        while time.perf_counter() < end:
                            for _ in range(20):
                                fn()
                            torch.cuda.synchronize()
                    ms = timer(fn)
                    row = {"trial": trial, "state": state, "layout": layout, "way": way,
                           "tflops": 2 * N**3 / (ms * 1e-3) / 1e12, "gpu_after": gpu_state(dev)}
                    rows.append(row)
                    clock = (row["gpu_after"] or {}).get("sm_clock_mhz")
                    print(f"{trial} {state:18s} {layout:5s} {way:14s} {row['tflops']:7.1f} TFLOP/s  SM {clock} MHz",
                          flush=True)
    print("\nmedian (min-max) TFLOP/s over the trials:")
    summary = {}
    for state in ("after 1 s idle", "after 2 s of load"):
        for layout in layouts:
            for way in ways:
                r = [row["tflops"] for row in rows if (row["state"], row["layout"], row["way"]) == (state, layout, way)]
                summary[f"{state} | {layout} | {way}"] = {"median": statistics.median(r), "min": min(r), "max": max(r)}
                print(f"  {state:18s} {layout:5s} {way:14s} {statistics.median(r):7.1f} ({min(r):.1f}-{max(r):.1f})")
    if a.json:
        Path(a.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                            "summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
