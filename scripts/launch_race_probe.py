#!/usr/bin/env python3
"""Is ch13/persistent_gemm's slower level the host losing the race to issue the next sample?

The harness times a fed pair's samples back to back on one stream: per sample, the feed (two copies of new A
values), a start event, the call, an end event; no sync inside a round. That keeps the GPU busy only while
the host issues a sample faster than the GPU runs one. The split kernel runs in about 70 us; Triton's JIT
launch binds and checks its arguments in Python on every call. Where the host falls behind, the GPU reaches a
start event before the kernel is launched, and the sample times the launch's host time as well.

For each of the pair's two kernels (one program per tile; persistent with the split tail), launched through
the JIT (as the pair did until 105c17f) and through the compiled kernel's own launcher
with the arguments bound once (ch13/triton_kernels.py bound_launch, as the pair does now), this measures:
  head start: the GPU first sleeps 20 ms, so every sample is queued before the GPU reaches it: the events
              time the GPU alone, and the host's issue time per sample is read on the host clock;
  harness:    rounds as the harness runs them (sync, then the samples with no head start): the per-sample
              times and the share of them more than 25% over the head-start median (the slower level).

  python scripts/launch_race_probe.py OUT.md [--rounds 100] [--samples 200]   (GPU only)
"""
import argparse
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

HEAD_START_CYCLES = 40_000_000   # about 20 ms at 2 GHz: longer than the host takes to issue a head-start batch
HEAD_START_SAMPLES = 64          # 5 GPU operations each: well inside the launch queue
SLOW = 1.25                      # a sample this far over the head-start median is on the slower level


def calls(dev):
    """{name: callable} for both kernels and both launch paths, on the pair's workload; the feed; and what
    checks them (the output, the product in fp32, A and its original values)."""
    import torch
    from ch13 import triton_kernels as tk
    from ch13.baseline_persistent_gemm import CONFIG, workload
    from common.inputs import SHIFT_STEP, rotate_into
    w = workload(seed=1234, device=dev)
    a, b = w.inputs["a"], w.inputs["b"]
    src = a.clone()
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=dev)
    split = tk.PersistentGemm(out, CONFIG, torch.cuda.get_device_properties(dev).multi_processor_count)
    feed = lambda i: rotate_into(a, src, i * SHIFT_STEP % a.numel())  # noqa: E731 - the harness's feed
    entries = {"one program per tile, JIT launch": lambda: tk.gemm(a, b, None, out, gelu=False, config=CONFIG),
               "one program per tile, bound launch (the pair's baseline)":
                   tk.gemm_launcher(a, b, None, out, False, CONFIG),
               "split tail, JIT launch": lambda: split(a, b),
               "split tail, bound launch (the pair's variant)": split.bind(a, b)}
    return entries, feed, out, a.float() @ b.float(), a, src


def samples(fn, feed, n, head_start):
    """Per-sample event times (us) of n samples issued back to back, and the host's issue time per sample."""
    import torch
    torch.cuda.synchronize()
    if head_start:
        torch.cuda._sleep(HEAD_START_CYCLES)
    pending = []
    t0 = time.perf_counter()
    for i in range(n):
        feed(i)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        pending.append((s, e))
    host = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in pending], host


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--rounds", type=int, default=100, help="harness-style rounds per entry (default 100)")
    ap.add_argument("--samples", type=int, default=200, help="samples per round (the harness's most: 200)")
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("error: launch_race_probe.py needs a CUDA GPU; none is visible to PyTorch", file=sys.stderr)
        return 2
    from common.cli import git_commit
    dev = torch.device("cuda")
    entries, feed, out, ref, x, src = calls(dev)
    for name, fn in entries.items():   # every path computes the product (the feed restored A first)
        x.copy_(src)
        fn()
        err = float((out.float() - ref).norm() / ref.norm())
        if not err < 1e-2:
            print(f"error: {name} does not compute A @ B (relative error {err:.2e})", file=sys.stderr)
            return 1
    for fn in entries.values():   # warm-up under load: clocks settle
        t_end = time.perf_counter() + 1.0
        while time.perf_counter() < t_end:
            samples(fn, feed, 50, False)
    rows = ["| entry | GPU per sample, head start (us) | host issue per sample (us) | harness rounds: median (us) "
            "| on the slower level | slower level's median (us) | host per sample in those rounds (us) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    # Rounds of every entry interleaved, as the harness interleaves a pair's variants: drift falls on all alike.
    gpu = {k: [] for k in entries}
    host_hs = {k: [] for k in entries}
    timed = {k: [] for k in entries}
    host_r = {k: [] for k in entries}
    for r in range(a.rounds):
        for name, fn in entries.items():
            if r % 4 == 0:
                t, h = samples(fn, feed, HEAD_START_SAMPLES, True)
                gpu[name] += t[1:]
                host_hs[name].append(h)
            t, h = samples(fn, feed, a.samples, False)
            timed[name] += t
            host_r[name].append(h)
    for name in entries:
        g = statistics.median(gpu[name])
        slow = [t for t in timed[name] if t > SLOW * g]
        rows.append(f"| {name} | {g:.1f} | {statistics.median(host_hs[name]):.1f} | "
                    f"{statistics.median(timed[name]):.1f} | {len(slow) / len(timed[name]):.0%} | "
                    f"{statistics.median(slow) if slow else float('nan'):.1f} | "
                    f"{statistics.median(host_r[name]):.1f} |")
        print(rows[-1], flush=True)
    import triton
    text = (f"# Does the host's issue of each sample set persistent_gemm's slower level?\n\n"
            f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}, Triton {triton.__version__}, commit "
            f"`{git_commit()}`. `scripts/launch_race_probe.py`, {a.rounds} rounds of {a.samples} samples per "
            f"entry (interleaved), each sample the harness's: the feed (two copies of new A values), start event, "
            f"the call, end event. The head-start columns: the GPU sleeps 20 ms first, so each of "
            f"{HEAD_START_SAMPLES} samples is queued before it runs (the GPU's time; the host's issue time on "
            f"the host clock). The slower level: samples over {SLOW}x the head-start median.\n\n"
            + "\n".join(rows) + "\n")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
