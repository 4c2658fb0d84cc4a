#!/usr/bin/env python3
"""Two questions about chapter 13's fp8_linear pair, measured on a GPU with the harness's timer.

1. What does the L2 scrub leave inside the timed call? The harness empties L2 before each sample of a
   memory-bound pair. A scrub that *writes* a buffer twice L2's size leaves L2 full of dirty lines, and the
   next call, reading its own data, writes them back to memory inside its events; the harness's scrub
   (common.timing.L2Scrubber) *reads* the buffer and leaves clean lines. Each call below is timed after a
   scrub that only sleeps on the GPU (the control: nothing evicted, the queue kept full so the host's launch
   is not timed), after the writing scrub and after the harness's reading scrub. Reads of 16 and 32 MiB
   (inside L2) check that the reading scrub empties L2: after it they must be slower than after the sleep.
2. Programmatic dependent launch in the Triton MLP (the down projection launched while the up projection
   still runs), and the block sizes of each layer with it, under the harness's scrub.

  python scripts/fp8_mlp_probe.py OUT.md [--budget 2] [--up-blocks ...] [--down-blocks ...]   (GPU only)
"""
import argparse
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


class Scrub:
    """Before a sample: sleep on the GPU (touching no memory), write a buffer twice L2's size, or the
    harness's own scrub (read)."""

    def __init__(self, device, mode):
        import torch
        from common.timing import L2Scrubber
        self.mode, self.read = mode, L2Scrubber(device)
        self.buf = torch.zeros_like(self.read.buf)

    def __call__(self):
        import torch
        if self.mode == "sleep":
            torch.cuda._sleep(60_000)      # about as long as a scrub (30 us at 2 GHz)
        elif self.mode == "write":
            self.buf.fill_(1)
        else:
            self.read()


def blocks_arg(text):
    """'64,256,1,4,4,0,0' -> (64, 256, 1, 4, 4, False, False): BLOCK_N, BLOCK_K, SPLIT_K, warps, stages, TMA, SWAP."""
    v = [int(t) for t in text.split(",")]
    return tuple(v[:5]) + tuple(bool(t) for t in v[5:])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=pathlib.Path, help="Markdown file for the two tables")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timing per entry (default 2)")
    ap.add_argument("--up-blocks", type=blocks_arg, nargs="*", default=[],
                    help="other blocks for the up projection, each BLOCK_N,BLOCK_K,SPLIT_K,warps,stages,TMA,SWAP")
    ap.add_argument("--down-blocks", type=blocks_arg, nargs="*", default=[], help="the same for the down projection")
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
    scrubs = {m: Scrub(dev, m) for m in ("sleep", "write", "read")}

    def feed(i):                       # new activations before every sample, outside the events
        x.normal_()

    q_up, q_down = quantize_rows(w.inputs["w_up"]), quantize_rows(w.inputs["w_down"])

    def triton_mlp(pdl, up_blocks=None, down_blocks=None):
        up = FP8Linear(x, *q_up, w.inputs["b_up"], gelu=True, blocks=up_blocks, pdl="first" if pdl else None)
        down = FP8Linear(up.out, *q_down, w.inputs["b_down"], blocks=down_blocks, pdl="second" if pdl else None)

        def call():
            up()
            return down()
        return call

    ref = base.prepare(w)
    calls = {"eager bf16 (baseline)": ref, "Triton fp8": triton_mlp(False), "Triton fp8, PDL": triton_mlp(True)}
    blocks = {f"Triton fp8, PDL, up {ub}": triton_mlp(True, up_blocks=ub) for ub in a.up_blocks}
    blocks.update({f"Triton fp8, PDL, down {db}": triton_mlp(True, down_blocks=db) for db in a.down_blocks})
    for name, c in {**calls, **blocks}.items():      # every variant verified before it is timed
        feed(0)
        y, r = c().float(), ref().float()
        err = float((y - r).norm() / r.norm())
        if not err < 0.15 or not torch.isfinite(y).all():
            print(f"error: {name} does not match the baseline (relative error {err:.2e})", file=sys.stderr)
            return 1
    reads = {}
    for mib in (16, 32, 235):
        buf = torch.ones(mib * 2**20 // 4, dtype=torch.float32, device=dev)
        acc = torch.zeros((), dtype=torch.float32, device=dev)
        reads[f"read {mib} MiB (amax)"] = (lambda b=buf, o=acc: torch.amax(b, dim=0, out=o))

    rows = ["| call | " + " | ".join(f"after {s} (us)" for s in scrubs) + " | write - read (us) | read - sleep (us) |",
            "| --- | " + " ---: |" * (len(scrubs) + 2)]
    times = {}
    for name, c in {**reads, **calls}.items():
        t = {s: time_call(c, dev, flush_l2=f, budget_s=a.budget, feed=feed) for s, f in scrubs.items()}
        times[name] = t
        us = {s: t[s].median_ms * 1e3 for s in scrubs}
        rows.append(f"| {name} | " + " | ".join(f"{us[s]:.1f} ±{t[s].median_ci_pct:.1f}%" for s in scrubs)
                    + f" | {us['write'] - us['read']:+.1f} | {us['read'] - us['sleep']:+.1f} |")
        print(rows[-1], flush=True)
    base_ms = {s: times["eager bf16 (baseline)"][s].median_ms for s in scrubs}
    sp = ["| variant | after the write scrub | after the harness's read scrub | kernels' span per call, back to back (us) |",
          "| --- | ---: | ---: | ---: |"]
    for name, c in calls.items():
        span, kernels = kernels_per_call(c)
        sp.append(f"| {name} | {base_ms['write'] / times[name]['write'].median_ms:.3f}x | "
                  f"{base_ms['read'] / times[name]['read'].median_ms:.3f}x | {span:.1f} |")
        print(sp[-1], flush=True)
    for name, c in blocks.items():
        t = time_call(c, dev, flush_l2=scrubs["read"], budget_s=a.budget, feed=feed)
        sp.append(f"| {name} | | {base_ms['read'] / t.median_ms:.3f}x ({t.median_ms * 1e3:.1f} us) | |")
        print(sp[-1], flush=True)
    text = (f"# fp8_linear: the L2 scrub's write-back, and PDL between the two layers\n\n"
            f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}, commit "
            f"`{os.environ.get('GIT_COMMIT', 'unknown')}`. `scripts/fp8_mlp_probe.py`: each entry timed by "
            f"common.timing.time_call (one call per sample, new activations before each, the scrub outside "
            f"the events), {a.budget} s budget. Median per call.\n\n" + "\n".join(rows)
            + "\n\nSpeedup over eager bf16 after the same scrub; blocks are (BLOCK_N, BLOCK_K, SPLIT_K, warps, "
            "stages, TMA, SWAP), the others the pair's (ch13/fp8_weight_only.py BLOCKS).\n\n" + "\n".join(sp) + "\n")
    a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
