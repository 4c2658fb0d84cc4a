"""Gradient accumulation's trade, measured: time and peak memory of the grad_accumulation pair's step for
each micro-batch count, and which counts fit under a memory cap.

For k = 1, 2, 4, ... micro-batches of the pair's 65,536-token batch (ch1/baseline_grad_accumulation.py),
one gradient step: its median time (the harness's timer, common.timing.time_call) and the most GPU memory
it held above the model and the batch (torch.cuda.max_memory_allocated). With --cap-gb C the step then
runs under a real cap (torch.cuda.set_per_process_memory_fraction): the largest batch slice that fits
runs, the full batch fails with an out-of-memory error, and the table says which k fit. Writes
grad_accumulation_sweep.json, .md and .png (time against peak memory, one point per k) to --out.

    python ch1/grad_accumulation_sweep.py --out DIR [--micro 1 2 4 8 16 32 64 128] [--cap-gb 1.5]   (GPU only)
"""
from __future__ import annotations

import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import argparse
import json

import torch

from ch1.baseline_grad_accumulation import gradient_step, workload
from common.timing import time_call
from common.verify import TOLERANCE


GRAD_TOLERANCE = TOLERANCE["bf16"][0]   # relative: the harness's bf16 tolerance, the pair's own check


def peak_gb(fn) -> float:
    """GPU memory held above what was allocated before one call of fn, at its most."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 1e9


def sweep(micro: list[int], budget_s: float, log=print) -> list[dict]:
    w = workload(0, "cuda")
    model, x, y = w.inputs["model"], w.inputs["x"], w.inputs["y"]
    ref = [g.clone() for g in gradient_step(model, x, y, 1)]
    rows = []
    for k in micro:
        fn = lambda k=k: gradient_step(model, x, y, k)  # noqa: E731
        for p in model.parameters():
            p.grad = None                                # the step's own gradients count in its peak
        mem = peak_gb(fn)
        err = max(((g - r).norm() / r.norm()).item() for g, r in zip(fn(), ref))
        if not err <= GRAD_TOLERANCE:   # NaN fails too
            raise SystemExit(f"error: {k} micro-batches give a gradient {err:.2e} from the full batch's (over the "
                             f"bf16 tolerance {GRAD_TOLERANCE})")
        ms = time_call(fn, torch.device("cuda"), budget_s=budget_s, compute_bound=True).median_ms
        rows.append({"micro_batches": k, "tokens_per_slice": x.shape[0] // k, "ms": ms, "peak_gb": mem,
                     "tflops": w.flops / (ms * 1e-3) / 1e12, "grad_rel_error": err})
        log(f"k {k:4d}: {ms:8.3f} ms  {rows[-1]['tflops']:6.1f} TFLOP/s  peak {mem:6.3f} GB  grad error {err:.1e}", flush=True)
    return rows


def under_cap(micro: list[int], cap_gb: float, log=print) -> list[dict]:
    """Each k run once under a real cap on this process's GPU memory: fits, or runs out of memory."""
    w = workload(0, "cuda")
    model, x, y = w.inputs["model"], w.inputs["x"], w.inputs["y"]
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(min(1.0, (held + cap_gb * 1e9) / total))
    out = []
    try:
        for k in micro:
            try:
                gradient_step(model, x, y, k)
                torch.cuda.synchronize()
                out.append({"micro_batches": k, "fits": True})
            except torch.OutOfMemoryError:
                out.append({"micro_batches": k, "fits": False})
            for p in model.parameters():
                p.grad = None
            torch.cuda.empty_cache()
            log(f"under a {cap_gb} GB cap, k {k}: {'runs' if out[-1]['fits'] else 'out of memory'}", flush=True)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    return out


def table(rows: list[dict], capped: list[dict], cap_gb: float | None) -> str:
    fits = {c["micro_batches"]: c["fits"] for c in capped}
    head = "| micro-batches | tokens a slice | ms | TFLOP/s | time vs k=1 | peak GB | gradient rel. error |"
    head += f" under {cap_gb} GB |" if cap_gb else ""
    lines = [head, "|" + " ---: |" * (7 + bool(cap_gb))]
    for r in rows:
        line = (f"| {r['micro_batches']} | {r['tokens_per_slice']} | {r['ms']:.3f} | {r['tflops']:.1f} | "
                f"{r['ms'] / rows[0]['ms']:.2f}× | {r['peak_gb']:.3f} | {r['grad_rel_error']:.1e} |")
        if cap_gb:
            line += " runs |" if fits.get(r["micro_batches"]) else " out of memory |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], cap_gb: float | None, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot([r["peak_gb"] for r in rows], [r["ms"] for r in rows], "o-")
    for r in rows:
        ax.annotate(f"k={r['micro_batches']}", (r["peak_gb"], r["ms"]), fontsize=7, xytext=(4, 3),
                    textcoords="offset points")
    if cap_gb:
        ax.axvline(cap_gb, color="k", ls=":", lw=0.8, label=f"cap {cap_gb} GB")
        ax.legend(fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("peak GPU memory of the step (GB, above model and batch)")
    ax.set_ylabel("ms per gradient step")
    ax.set_title(f"Gradient accumulation, 65,536 tokens, {torch.cuda.get_device_name()}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--micro", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128],
                    help="micro-batch counts (each must divide 65,536)")
    ap.add_argument("--cap-gb", type=float, help="also run each count under this cap on the step's memory")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of timing per count")
    ap.add_argument("--out", type=pathlib.Path, required=True, help="folder for the results")
    a = ap.parse_args(argv)
    bad = [k for k in a.micro if k < 1 or 65536 % k]
    if bad:
        print(f"error: --micro {bad[0]} does not divide the 65,536-token batch", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: ch1/grad_accumulation_sweep.py needs a CUDA GPU; none is visible to PyTorch", file=sys.stderr)
        return 2
    rows = sweep(a.micro, a.budget)
    capped = under_cap(a.micro, a.cap_gb) if a.cap_gb else []
    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cap_gb": a.cap_gb}
    (a.out / "grad_accumulation_sweep.json").write_text(json.dumps({**meta, "rows": rows, "capped": capped}, indent=1))
    (a.out / "grad_accumulation_sweep.md").write_text(f"# Gradient accumulation on {meta['device']}\n\n" +
                                                      table(rows, capped, a.cap_gb))
    plot(rows, a.cap_gb, a.out / "grad_accumulation_sweep.png")
    print(table(rows, capped, a.cap_gb))
    return 0


if __name__ == "__main__":
    sys.exit(main())
