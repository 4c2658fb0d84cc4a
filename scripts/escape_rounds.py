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
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402

from common.timing import L2Scrubber  # noqa: E402


def rounds(fn, flush, n_rounds, per_round, round_start_event):
    out = []
    for _ in range(n_rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        first = torch.cuda.Event(enable_timing=True)
        if round_start_event:
            first.record()
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    a = ap.parse_args()
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
