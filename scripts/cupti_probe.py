#!/usr/bin/env python3
"""Does a profile slow the calls timed after it in the same process? (a measurement script, not a pair)

    python scripts/cupti_probe.py [--rounds 3] [--out FILE.json]      (needs a CUDA GPU)

A pair's worker times a variant, may profile it (every variant with --profile torch; a launch-bound pair's
kernel counts in every run), then times the next variant in the same process. This probe isolates that step.
Each arm is a fresh process that times three host-bound calls, profiles them with torch.profiler as the
harness does (5 calls, CPU and CUDA activities, its events read), times them again, profiles and times once
more:
  none      no profile between the timings: the drift of a process on its own,
  attached  TEARDOWN_CUPTI=0: Kineto leaves CUPTI attached after a profile (pytorch/pytorch#144455),
  teardown  TEARDOWN_CUPTI=1: what common/launch.py sets in a CUDA run's workers.
The calls: 64 tiny elementwise kernels launched one by one (eager), one nn.Linear chain of 8 bf16 layers
(cuBLAS), and the 64 kernels replayed from a CUDA graph. Each time is the median of 25 samples of 20 calls
back to back, timed with CUDA events. The arms alternate, --rounds times each; the table gives, per process,
each call's time after a profile over its time before. Exit 1 if an arm's process failed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ARMS = {"none": None, "attached": "0", "teardown": "1"}
SAMPLES, CALLS, WARMUP = 25, 20, 10


def calls(torch):
    """The three host-bound calls, built once."""
    x = torch.randn(4096, device="cuda")

    def eager():
        y = x
        for _ in range(64):
            y = torch.sin(y)
        return y
    layers = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).cuda().to(torch.bfloat16)
    h = torch.randn(16, 1024, device="cuda", dtype=torch.bfloat16)

    def linear():
        with torch.no_grad():
            return layers(h)
    eager()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        eager()
    return {"eager": eager, "linear": linear, "graph": graph.replay}


def ms_per_call(torch, fn) -> float:
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(SAMPLES):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(CALLS):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / CALLS)
    return statistics.median(times)


def profile_like_the_harness(torch, fns) -> None:
    from torch.profiler import ProfilerActivity, profile
    for fn in fns.values():
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
        prof.events()


def arm(name: str) -> dict:
    """One process: times before, after one profile, after a second (or the same without profiles)."""
    import torch
    fns = calls(torch)
    phases = {}
    for phase in ("before", "after1", "after2"):
        if phase != "before" and ARMS[name] is not None:
            profile_like_the_harness(torch, fns)
        phases[phase] = {k: ms_per_call(torch, fn) for k, fn in fns.items()}
    return {"arm": name, "TEARDOWN_CUPTI": os.environ.get("TEARDOWN_CUPTI"), "ms": phases}


def table(rows: list[dict]) -> str:
    out = ["| arm | round | call | before (ms) | after 1 profile | after 2 profiles |",
           "| --- | ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        for k, before in r["ms"]["before"].items():
            out.append(f"| {r['arm']} | {r['round']} | {k} | {before:.4f} | {r['ms']['after1'][k] / before:.3f}x | "
                       f"{r['ms']['after2'][k] / before:.3f}x |")
    out += ["", "Median over rounds of (time after two profiles) / (time before):", "",
            "| call | " + " | ".join(ARMS) + " |", "| --- |" + " ---: |" * len(ARMS)]
    for k in rows[0]["ms"]["before"]:
        cells = []
        for a in ARMS:
            ratios = [r["ms"]["after2"][k] / r["ms"]["before"][k] for r in rows if r["arm"] == a]
            cells.append(f"{statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})" if ratios else "-")
        out.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--rounds", type=int, default=3, help="processes per arm, the arms alternating (default 3)")
    ap.add_argument("--out", help="also write the rows as JSON to this file")
    ap.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)   # one arm's process, started by the driver
    a = ap.parse_args(argv)
    if a.arm:
        print(json.dumps(arm(a.arm)))
        return 0
    import torch
    if not torch.cuda.is_available():
        print("error: scripts/cupti_probe.py needs a CUDA GPU; none is visible to PyTorch", file=sys.stderr)
        return 2
    rows, failed = [], 0
    for rnd in range(1, a.rounds + 1):
        for name, teardown in ARMS.items():
            env = {k: v for k, v in os.environ.items() if k != "TEARDOWN_CUPTI"}
            if teardown is not None:
                env["TEARDOWN_CUPTI"] = teardown
            started = time.perf_counter()
            p = subprocess.run([sys.executable, __file__, "--arm", name], env=env, capture_output=True, text=True)
            if p.returncode != 0:
                failed += 1
                last = (p.stderr.strip().splitlines() or [""])[-1]
                print(f"{name} round {rnd}: exit {p.returncode}: {last}", file=sys.stderr)
                continue
            row = {**json.loads(p.stdout.strip().splitlines()[-1]), "round": rnd}
            rows.append(row)
            print(f"{name} round {rnd} ({time.perf_counter() - started:.0f} s): "
                  + ", ".join(f"{k} {row['ms']['before'][k]:.4f} -> {row['ms']['after2'][k]:.4f} ms"
                              for k in row["ms"]["before"]), flush=True)
    if rows:
        print(table(rows))
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
