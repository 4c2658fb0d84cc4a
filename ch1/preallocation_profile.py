#!/usr/bin/env python3
"""What allocation costs under PyTorch's caching allocator, and what it costs without it.

    python ch1/preallocation_profile.py [--json OUT]

ch1/preallocation times one pointwise step written with a fresh tensor per op (baseline) and with one
buffer allocated once (out= and in-place ops). This script shows where the time of each goes:
1. 2000 steps of each, back to back between two syncs (host time per step, the rate a loop sees);
2. 500 steps of each issued one at a time with the GPU idle (a sync before each): the median host time
   to issue one step, which a synchronized call (the harness's per-call figure) waits for in full;
3. torch.profiler over 200 steps of each: self CPU time per call of aten::empty_strided (the
   allocation), of the ops, and the number of cudaMalloc calls;
4. the same two loops in a child process with PYTORCH_NO_CUDA_MEMORY_CACHING=1, where every
   allocation is a cudaMalloc and every free a cudaFree: what preallocation saves when nothing caches.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402

from ch1 import baseline_preallocation as base  # noqa: E402
from ch1 import optimized_preallocation as opt  # noqa: E402
from common.timing import loop_ms  # noqa: E402


def issue_us(step, n=500):
    """Median host time to issue one step, the GPU idle before each (no overlap with the previous step)."""
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return sorted(times)[n // 2] * 1e6


def profile(step, n=200):
    from torch.profiler import ProfilerActivity, profile as prof
    with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for _ in range(n):
            step()
        torch.cuda.synchronize()
    rows = {}
    for e in p.key_averages():
        if e.key.startswith(("aten::", "cudaMalloc", "cudaFree", "cudaLaunchKernel")):
            rows[e.key] = {"calls_per_step": e.count / n, "self_cpu_us_per_call": e.self_cpu_time_total / max(e.count, 1)}
    return rows


def measure():
    dev = torch.device("cuda")
    w = base.workload(seed=0, device=dev)
    steps = {"baseline (fresh tensors)": base.prepare(w), "optimized (out=, in place)": opt.prepare(w)}
    return {name: {"loop_us_per_step": loop_ms(s, dev, calls=2000, warmup=50) * 1e3,
                   "issue_us_per_step": issue_us(s), "profile": profile(s)}
            for name, s in steps.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("error: ch1/preallocation_profile.py needs a CUDA GPU; none is visible to PyTorch", file=sys.stderr)
        sys.exit(2)  # bad input, as for every chapter script
    doc = measure()
    if a.child:
        print(json.dumps(doc))
        return
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    child = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, timeout=300)
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "caching_allocator": doc,
           "no_caching (PYTORCH_NO_CUDA_MEMORY_CACHING=1)": json.loads(child.stdout) if child.returncode == 0 else child.stderr[-500:]}
    for mode, res in list(out.items())[2:]:
        print(f"== {mode}")
        if isinstance(res, str):
            print(res)
            continue
        for name, r in res.items():
            pr = r["profile"]
            alloc = pr.get("aten::empty_strided") or pr.get("aten::empty") or {}
            mallocs = (pr.get("cudaMalloc") or {}).get("calls_per_step", 0)
            print(f"  {name:28s} {r['loop_us_per_step']:8.2f} us/step back to back, "
                  f"{r['issue_us_per_step']:6.2f} us to issue   empty_strided {alloc.get('calls_per_step', 0):.0f}/step "
                  f"at {alloc.get('self_cpu_us_per_call', 0):6.2f} us   cudaMalloc {mallocs:.1f}/step")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
