#!/usr/bin/env python3
"""Two questions about chapter 13's fp8_linear pair, measured on a GPU with the harness's timer.

1. What L2 state should a timed call start from? The harness empties L2 before each sample of a memory-bound
   pair. A scrub that *writes* a buffer twice L2's size leaves L2 full of dirty lines, and the next call
   writes them back to memory inside its events; a scrub that only *reads* leaves clean lines, but then a
   call that writes a lot leaves its last L2 of writes to the next scrub, outside its events. The harness's
   scrub (common.timing.L2Scrubber) reads, then writes as many bytes as the call's output: the state a loop
   of the call leaves. Each call below is timed after a scrub that only sleeps on the GPU (the control: the
   loop of the call itself, with nothing evicted and the queue kept full so the host's launch is not timed),
   after the writing scrub, after the reading one and after the harness's. For calls far larger than L2 the
   harness's scrub must match the control whether the call writes little (the reads, the MLP) or a lot (the
   copy); reads of 16 and 32 MiB (inside L2) must be slower after it than after the sleep: L2 was emptied.
2. Programmatic dependent launch in the Triton MLP (the down projection launched while the up projection
   still runs), and the block sizes of each layer with it, under the harness's scrub.

  python scripts/fp8_mlp_probe.py OUT.md [--budget 2] [--up-blocks ...] [--down-blocks ...]   (GPU only)
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


class Scrub:
    """Before a sample: sleep on the GPU (touching no memory), write a buffer twice L2's size, read it
    (the harness's scrubber with no output bytes), or the harness's scrubber as the harness sets it."""

    def __init__(self, device, mode, output_bytes=0):
        from common.timing import L2Scrubber
        self.mode, self.harness = mode, L2Scrubber(device)
        self.harness.output_bytes(output_bytes if mode == "harness" else 0)

    def __call__(self):
        import torch
        if self.mode == "sleep":
            torch.cuda._sleep(60_000)      # about as long as a scrub (30 us at 2 GHz)
        elif self.mode == "write":
            self.harness.buf.fill_(1)
        else:
            self.harness()


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
    from common.cli import git_commit
    from common.timing import time_call
    from ch13 import baseline_fp8_linear as base
    from ch13.fp8_weight_only import FP8Linear, quantize_rows
    from scripts.fp8_linear_kernels import kernels_per_call

    dev = torch.device("cuda")
    w = base.workload(0, dev)
    x = w.inputs["x"]
    modes = ("sleep", "write", "read", "harness")
    scrubs = {m: Scrub(dev, m) for m in modes[:3]}

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
    reads, out_bytes = {}, {}
    for mib in (16, 32, 235):
        buf = torch.ones(mib * 2**20 // 4, dtype=torch.float32, device=dev)
        acc = torch.zeros((), dtype=torch.float32, device=dev)
        reads[f"read {mib} MiB (amax)"] = (lambda b=buf, o=acc: torch.amax(b, dim=0, out=o))
        out_bytes[f"read {mib} MiB (amax)"] = 4
    src = torch.ones(235 * 2**20 // 4, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    reads["copy 235 MiB (writes 235 MiB)"] = lambda: dst.copy_(src)
    out_bytes["copy 235 MiB (writes 235 MiB)"] = dst.nbytes
    for name, c in calls.items():
        out_bytes[name] = c().nbytes

    rows = ["| call | " + " | ".join(f"after {m} (us)" for m in modes)
            + " | write - sleep (us) | read - sleep (us) | harness - sleep (us) |",
            "| --- | " + " ---: |" * (len(modes) + 3)]
    times = {}
    for name, c in {**reads, **calls}.items():
        mine = {**scrubs, "harness": Scrub(dev, "harness", out_bytes[name])}
        t = {m: time_call(c, dev, flush_l2=mine[m], budget_s=a.budget, feed=feed) for m in modes}
        del mine
        times[name] = t
        us = {m: t[m].median_ms * 1e3 for m in modes}
        rows.append(f"| {name} | " + " | ".join(f"{us[m]:.1f} ±{t[m].median_ci_pct:.1f}%" for m in modes)
                    + "".join(f" | {us[m] - us['sleep']:+.1f}" for m in ("write", "read", "harness")) + " |")
        print(rows[-1], flush=True)
    base_ms = {m: times["eager bf16 (baseline)"][m].median_ms for m in modes}
    sp = ["| variant | after sleep | after the write scrub | after the read scrub | after the harness's scrub "
          "| kernels' span per call, back to back (us) |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, c in calls.items():
        span, kernels = kernels_per_call(c)
        sp.append(f"| {name} | " + " | ".join(f"{base_ms[m] / times[name][m].median_ms:.3f}x" for m in modes)
                  + f" | {span:.1f} |")
        print(sp[-1], flush=True)
    harness = Scrub(dev, "harness", out_bytes["eager bf16 (baseline)"])
    for name, c in blocks.items():
        t = time_call(c, dev, flush_l2=harness, budget_s=a.budget, feed=feed)
        sp.append(f"| {name} | | | | {base_ms['harness'] / t.median_ms:.3f}x ({t.median_ms * 1e3:.1f} us) | |")
        print(sp[-1], flush=True)
    text = (f"# The L2 state before a timed call, and PDL between fp8_linear's two layers\n\n"
            f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}, commit "
            f"`{git_commit()}`. `scripts/fp8_mlp_probe.py`: each entry timed by "
            f"common.timing.time_call (one call per sample, new activations before each, the scrub outside "
            f"the events), {a.budget} s budget. Median per call.\n\n" + "\n".join(rows)
            + "\n\nSpeedup over eager bf16 after the same scrub; blocks are (BLOCK_N, BLOCK_K, SPLIT_K, warps, "
            "stages, TMA, SWAP), the others the pair's (ch13/fp8_weight_only.py BLOCKS).\n\n" + "\n".join(sp) + "\n")
    a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
