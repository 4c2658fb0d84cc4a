#!/usr/bin/env python3
"""Why the escaped-work check failed correct memory-bound pairs on an H100: measure it, round by round.

    python scripts/escape_rounds.py [--json OUT]

The check compares a round's host wall time (sync, ~50 ms of samples, sync) with the span its CUDA
events cover. For a memory-bound call (64M-float y = 2x + 1, 0.27 ms) it times rounds exactly as the
harness did before the fix (span = first sample's start to last sample's end; the L2 scrub of the
first sample lies before that span) and as it does now (an event recorded before anything else of the
round), in a fresh process where the scrubber's kernel has never run, then again once it has. Prints
wall/span per round. CUDA_MODULE_LOADING (lazy by default since CUDA 11.7) is printed too: a kernel's
first launch in a process loads its module, on the host, before the kernel is queued.

    python scripts/escape_rounds.py --neighbours [--json OUT]

Why it failed the tests' fixture pair (4096 floats) while other processes used the GPU: rounds of that call
alone, then beside a process that keeps the GPU busy (large GEMMs, or a stream of small kernels), with the host
clock started before the round-start event (the harness until the fix) and once the GPU has reached it (now).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402

from common.timing import L2Scrubber  # noqa: E402


def rounds(fn, flush, n_rounds, per_round, round_start_event, clock_when_reached=False):
    """Raw wall/span of each round (the harness also takes ESCAPE_SLACK_S off the wall time). `clock_when_reached`
    (with `round_start_event`): the host clock starts once the GPU has reached the round-start event."""
    out = []
    for _ in range(n_rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        first = torch.cuda.Event(enable_timing=True)
        if round_start_event:
            first.record()
            if clock_when_reached:
                first.synchronize()
                t0 = time.perf_counter()
        pending = []
        for _ in range(per_round):
            flush()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            pending.append((s, e))
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        start = first if round_start_event else pending[0][0]
        span = start.elapsed_time(pending[-1][1]) * 1e-3
        out.append({"wall_ms": wall * 1e3, "span_ms": span * 1e3, "ratio": wall / span})
    return out


def hold(kind, seconds):
    """The neighbour: keep the GPU busy for `seconds` with 8192^2 bf16 GEMMs or with 4096-float kernels."""
    if kind == "gemm":
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        step = lambda: a @ a  # noqa: E731
    else:
        a = torch.randn(4096, device="cuda")
        step = lambda: a.mul_(1.0)  # noqa: E731
    step()
    torch.cuda.synchronize()
    print("ready", flush=True)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(20):
            step()
        torch.cuda.synchronize()


def neighbours():
    """Median wall/span of the fixture's call (4096 floats, scrubbed L2, 200 samples a round), alone and beside
    each neighbour, the host clock started before the round-start event and once the GPU reached it."""
    x = torch.randn(4096, device="cuda")
    fn = lambda: x * 2 + 1  # noqa: E731
    scrub = L2Scrubber(torch.device("cuda"))
    rounds(fn, scrub, 3, 200, True)  # warm: kernels loaded
    doc = {}
    for who in ("alone", "gemm", "small"):
        proc = None
        if who != "alone":
            proc = subprocess.Popen([sys.executable, __file__, "--hold", who, "--seconds", "30"],
                                    stdout=subprocess.PIPE, text=True)
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(1.0)
        row = {}
        for _ in range(5):   # the two clocks in turn, 5 x 4 rounds each
            for name, reached in (("clock before the event", False), ("clock once reached", True)):
                row.setdefault(name, []).extend(rounds(fn, scrub, 4, 200, True, reached))
        if proc:
            proc.kill()
            proc.wait()
        doc[who] = {name: {"median_ratio": statistics.median(r["ratio"] for r in rs),
                           "median_span_ms": statistics.median(r["span_ms"] for r in rs), "rounds": rs}
                    for name, rs in row.items()}
        print(f"{who:6s} " + "   ".join(f"{name}: median wall/span {d['median_ratio']:.3f} "
                                        f"(span {d['median_span_ms']:.2f} ms)" for name, d in doc[who].items()))
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--neighbours", action="store_true", help="the fixture's call alone and beside a busy process")
    ap.add_argument("--hold", choices=("gemm", "small"), help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=30.0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.hold:
        return hold(a.hold, a.seconds)
    if a.neighbours:
        doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, **neighbours()}
        if a.json:
            Path(a.json).write_text(json.dumps(doc, indent=1))
        return
    x = torch.randn(64 << 20, device="cuda")
    fn = lambda: x * 2 + 1  # noqa: E731
    for _ in range(50):  # the call's own kernels are loaded and warm; the scrubber's are not
        fn()
    torch.cuda.synchronize()
    scrub = L2Scrubber(torch.device("cuda"))
    t0 = time.perf_counter()
    cold = {"old span, scrubber never run": rounds(fn, scrub, 3, 45, False)}
    first_round_s = time.perf_counter() - t0
    warm = {"old span, scrubber warm": rounds(fn, scrub, 3, 45, False),
            "round-start event": rounds(fn, scrub, 3, 45, True)}
    # The first launch of a kernel, timed on its own: a fresh fill kernel (uint8), host time to return
    b = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    b.fill_(3)
    first_launch_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    b.fill_(4)
    second_launch_ms = (time.perf_counter() - t0) * 1e3
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "CUDA_MODULE_LOADING": os.environ.get("CUDA_MODULE_LOADING", "(unset: lazy)"),
           "first_launch_of_a_kernel_ms": first_launch_ms, "second_launch_ms": second_launch_ms,
           "cold_rounds_wall_s": first_round_s, **cold, **warm}
    for k, v in list(cold.items()) + list(warm.items()):
        print(f"{k:32s} " + "  ".join(f"{r['ratio']:.3f} ({r['wall_ms']:.1f}/{r['span_ms']:.1f} ms)" for r in v))
    print(f"first launch of a new kernel: {first_launch_ms:.2f} ms on the host; the second: {second_launch_ms:.3f} ms")
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
