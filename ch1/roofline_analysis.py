"""Place a vector add and a large matmul on this device's measured roofline.

    python ch1/roofline_analysis.py [--output FILE.png] [--device cpu]

The picture goes to profiles/runs/<date>-<device>-roofline.png unless
--output says otherwise: profiles/runs/ holds user runs and git ignores it;
the committed pictures live under profiles/<gpu>/.

For each kernel: FLOPs and the fewest bytes it must move give its
arithmetic intensity (AI, FLOP/byte). The roofline says it can run at most
at min(peak FLOP/s, AI x bandwidth); the ridge point, peak / bandwidth, is
the AI where the two limits meet. Below the ridge a kernel is memory-bound,
above it compute-bound. The ceilings are this device's measured ones
(benchmark.py --peaks), not datasheet numbers.

  vector add  c = a + b, fp32: 1 FLOP per 12 bytes, AI = 0.083
  matmul      bf16 n^3: 2n^3 FLOPs over 3 n^2 x 2 bytes, AI = n/3 (2731 at n = 8192)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402

from common.peaks import invalidate, load_or_measure, peaks_path
from common.physics import SLACK  # noqa: E402
from common.timing import time_call  # noqa: E402


def measure(device: torch.device) -> list[dict]:
    on_gpu = device.type == "cuda"
    n_vec = (64 << 20) if on_gpu else (8 << 20)
    n_mm = 8192 if on_gpu else 1024
    dtype = torch.bfloat16 if on_gpu else torch.float32
    g = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(n_vec, device=device, generator=g) for _ in range(2))
    c = torch.empty_like(a)
    x, y = (torch.randn(n_mm, n_mm, device=device, generator=g).to(dtype) for _ in range(2))
    assert torch.allclose(torch.add(a, b, out=c)[:1000], a[:1000] + b[:1000])  # the kernel computes what we count
    rows = []
    for name, fn, flops, nbytes, flush, prec in (
            ("vector add (fp32)", lambda: torch.add(a, b, out=c), n_vec, 12 * n_vec, True, "fp32"),
            (f"matmul {n_mm}^3 ({'bf16' if on_gpu else 'fp32'})", lambda: x @ y, 2 * n_mm**3,
             3 * n_mm * n_mm * x.element_size(), False, "bf16" if on_gpu else "fp32")):
        # Timed like the pairs and the ceilings: the matmul after the compute-bound warm-up.
        t = time_call(fn, device, flush_l2=flush and on_gpu, budget_s=2.0, compute_bound=not flush)
        s = t.median_ms * 1e-3
        rows.append({"name": name, "median_ms": t.median_ms, "flops": flops, "bytes": nbytes, "ai": flops / nbytes,
                     "tflops": flops / s / 1e12, "gbps": nbytes / s / 1e9, "precision": prec})
    return rows


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", "--out", dest="out", type=Path, metavar="FILE.png",
                    help="where to save the picture (default: profiles/runs/<date>-<device>-roofline.png)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args(argv)
    device = torch.device(a.device)
    peaks = load_or_measure(device)
    bw = peaks["copy_gbps"]
    rows = measure(device)
    print(f"device: {peaks['device']}; measured copy bandwidth {bw:.0f} GB/s")
    for r in rows:
        peak = peaks["matmul_tflops"][r["precision"]]
        ridge = peak * 1e12 / (bw * 1e9)
        roof = min(peak, r["ai"] * bw * 1e9 / 1e12)
        bound = "memory-bound" if r["ai"] < ridge else "compute-bound"
        r.update(ridge=ridge, roof_tflops=roof, bound=bound, pct_of_roof=100 * r["tflops"] / roof)
        # The physics check's rule (common.physics.SLACK): more than 10% above a roof is not a result.
        r["suspect"] = r["pct_of_roof"] > 100 * SLACK
        print(f"{r['name']:24s} AI {r['ai']:9.3f} FLOP/B  ridge {ridge:6.1f} ({r['precision']})  "
              f"{r['median_ms']:8.4f} ms  {r['tflops']:8.3f} TFLOP/s  {r['gbps']:8.1f} GB/s  "
              + (f"SUSPECT: {r['pct_of_roof']:.0f}% of its roof; the ceilings were likely measured on a busy "
                 f"machine" if r["suspect"] else f"{bound}, {r['pct_of_roof']:.0f}% of its roof"))
    if any(r["suspect"] for r in rows):
        invalidate(peaks_path(device), "a measurement beat its roof by more than 10%")

    from common.figures import roofline_axes, save_figure
    fig, ax = roofline_axes(peaks, f"Roofline of {peaks['device']} (measured ceilings)",
                            precisions={r["precision"] for r in rows}, ridges=True)
    for r in rows:
        ax.scatter(r["ai"], r["tflops"], zorder=3, label=f"{r['name']}: {r['tflops']:.2f} TFLOP/s ({r['bound']})")
    ax.legend(fontsize=7, loc="lower right")
    from common.cli import new_run_dir
    out = a.out or new_run_dir(f"{peaks['device']} roofline").with_suffix(".png")
    save_figure(fig, out)
    print(f"saved {out}")
    return rows


if __name__ == "__main__":
    main()
