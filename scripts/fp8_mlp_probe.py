#!/usr/bin/env python3
"""Two questions about chapter 13's fp8_linear pair, measured on a GPU with the harness's timer.

1. What does the L2 scrub leave inside the timed call? The harness empties L2 before each sample of a
   memory-bound pair. A scrub that *writes* a buffer twice L2's size leaves L2 full of dirty lines, and the
   next call, reading its own data, writes them back to memory inside its events; a scrub that *reads* the
   buffer leaves clean lines that cost nothing to evict. Each call below is timed with no scrub, the write
   scrub, the read scrub and write-then-read (which must match the read scrub if reading evicts the dirty
   lines). A read of 16 MiB (inside L2) shows whether a scrub empties L2 at all: scrubbed, it must be slower
   than unscrubbed.
2. Programmatic dependent launch in the Triton MLP: the down projection launched while the up projection
   still runs, prefetching the first `prefetch` bytes of each of its weight rows into L2 before it waits.

  python scripts/fp8_mlp_probe.py OUT.md [--budget 2]        (GPU only)
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


class Scrub:
    """Touch a buffer of twice L2's size: write it (zero_), read it (amax into one int), or both."""

    def __init__(self, device, mode):
        import torch
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.buf = torch.ones(max(2 * l2, 64 * 2**20) // 4, dtype=torch.int32, device=device)
        self.acc = torch.zeros((), dtype=torch.int32, device=device)
        self.mode = mode

    def __call__(self):
        import torch
        if "write" in self.mode:
            self.buf.fill_(1)
        if "read" in self.mode:
            torch.amax(self.buf, dim=0, out=self.acc)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=pathlib.Path, help="Markdown file for the two tables")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timing per entry (default 2)")
    ap.add_argument("--prefetch", type=int, nargs="+", default=[0, 1024, 2048, 4096],
                    help="bytes per weight row the down projection prefetches (default 0 1024 2048 4096)")
    a = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 2
    from common.timing import time_call
    from ch13 import baseline_fp8_linear as base
    from ch13.fp8_weight_only import FP8Linear, quantize_rows
    from scripts.fp8_linear_kernels import kernels_per_call

    dev = torch.device("cuda")
    w = base.workload(0, dev)
    x = w.inputs["x"]
    scrubs = {"none": None, "write": Scrub(dev, "write"), "read": Scrub(dev, "read"),
              "write, then read": Scrub(dev, "write read")}

    def feed(i):                       # new activations before every sample, outside the events
        x.normal_()

    q_up, q_down = quantize_rows(w.inputs["w_up"]), quantize_rows(w.inputs["w_down"])

    def triton_mlp(pdl, prefetch=0):
        up = FP8Linear(x, *q_up, w.inputs["b_up"], gelu=True, pdl="first" if pdl else None)
        down = FP8Linear(up.out, *q_down, w.inputs["b_down"], pdl="second" if pdl else None, prefetch=prefetch)

        def call():
            up()
            return down()
        return call

    ref = base.prepare(w)
    calls = {"eager bf16 (baseline)": ref, "Triton fp8": triton_mlp(False)}
    for p in a.prefetch:
        calls[f"Triton fp8, PDL, prefetch {p} B/row"] = triton_mlp(True, p)
    for name, c in calls.items():      # every variant verified before it is timed
        feed(0)
        y, r = c().float(), ref().float()
        err = float((y - r).norm() / r.norm())
        if not err < 0.15 or not torch.isfinite(y).all():
            print(f"error: {name} does not match the baseline (relative error {err:.2e})", file=sys.stderr)
            return 1
    reads = {}
    for mib in (16, 117, 235):
        buf = torch.ones(mib * 2**20 // 2, dtype=torch.bfloat16, device=dev)
        acc = torch.zeros((), dtype=torch.bfloat16, device=dev)
        reads[f"read {mib} MiB (amax)"] = (lambda b=buf, o=acc: torch.amax(b, dim=0, out=o))

    rows = ["| call | " + " | ".join(f"scrub: {s} (us)" for s in scrubs) + " | write - read (us) |",
            "| --- | " + " ---: |" * (len(scrubs) + 1)]
    times = {}
    for name, c in {**reads, **calls}.items():
        t = {s: time_call(c, dev, flush_l2=f or False, budget_s=a.budget, feed=feed) for s, f in scrubs.items()}
        times[name] = t
        rows.append(f"| {name} | " + " | ".join(f"{t[s].median_ms * 1e3:.1f} ±{t[s].median_ci_pct:.1f}%"
                                                for s in scrubs)
                    + f" | {(t['write'].median_ms - t['read'].median_ms) * 1e3:+.1f} |")
        print(rows[-1], flush=True)
    b = times["eager bf16 (baseline)"]
    sp = ["| variant | speedup, write scrub | speedup, read scrub | kernels' span per call, back to back (us) |",
          "| --- | ---: | ---: | ---: |"]
    for name, c in calls.items():
        span, kernels = kernels_per_call(c)
        sp.append(f"| {name} | {b['write'].median_ms / times[name]['write'].median_ms:.3f}x | "
                  f"{b['read'].median_ms / times[name]['read'].median_ms:.3f}x | {span:.1f} "
                  f"({len(kernels)} kernel names) |")
        print(sp[-1], flush=True)
    text = (f"# fp8_linear: the L2 scrub's write-back, and PDL between the two layers\n\n"
            f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}. `scripts/fp8_mlp_probe.py`: each "
            f"entry timed by common.timing.time_call (one call per sample, new activations before each, "
            f"the scrub outside the events), {a.budget} s budget.\n\n" + "\n".join(rows) + "\n\n"
            + "\n".join(sp) + "\n")
    a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
