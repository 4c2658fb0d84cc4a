"""The cost curve of matmul alignment: TFLOP/s as K = N crosses 4080..4112, bf16 and fp8.

    python ch13/alignment_sweep.py [--tokens 8192] [--dims 4080 4112] [--out DIR]

For every dimension d in the range: y = x @ W with x (tokens x d), W (d x d) in bf16, timed with CUDA events
(median of 20 after warm-up), and the same in float8 through torch._scaled_mm where d is a multiple of
16 (elsewhere _scaled_mm refuses, and the padded cost is drawn instead: pad to the next multiple of 16).
Writes alignment_sweep.json and alignment_sweep.png (TFLOP/s over d, multiples of 8 and 16 marked).
GPU only.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ch13.sweep import cannot_sweep, time_ms  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=8192, help="rows of x (default 8192)")
    p.add_argument("--dims", type=int, nargs=2, default=(4080, 4112), metavar=("FIRST", "LAST"),
                   help="the range of d = K = N, both ends included (default 4080 4112)")
    p.add_argument("--out", type=Path, default=ROOT / "profiles" / "runs" / "alignment_sweep",
                   help="output folder (default profiles/runs/alignment_sweep)")
    a = p.parse_args(argv)
    refused = cannot_sweep(a.out, "GEMMs", triton=False)
    if refused:
        return refused
    import torch
    from ch13.baseline_alignment import padded
    from ch13.optimized_alignment_fp8 import FP8, FP8_MAX, quantize_weight
    rows = []
    for d in range(a.dims[0], a.dims[1] + 1):
        x = torch.randn(a.tokens, d, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(d, d, device="cuda", dtype=torch.bfloat16) / d**0.5
        flops = 2.0 * a.tokens * d * d
        bf16_ms = time_ms(lambda: x @ w)
        dp = padded(d)
        wq, ws = quantize_weight(w, dp, dp)
        xq = torch.zeros(a.tokens, dp, dtype=FP8, device="cuda")
        xs = (x.abs().max().float() / FP8_MAX).clamp(min=1e-12)
        xq[:, :d] = (x.float() / xs).to(FP8)
        fp8_ms = time_ms(lambda: torch._scaled_mm(xq, wq, scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16))
        rows.append({"d": d, "bf16_ms": bf16_ms, "bf16_tflops": flops / bf16_ms / 1e9, "fp8_padded_to": dp,
                     "fp8_ms": fp8_ms, "fp8_tflops": flops / fp8_ms / 1e9})
        print(f"d={d}: bf16 {bf16_ms:.3f} ms ({rows[-1]['bf16_tflops']:.0f} TFLOP/s), fp8 (padded to {dp}) "
              f"{fp8_ms:.3f} ms", flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "alignment_sweep.json").write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                                            "tokens": a.tokens, "rows": rows}, indent=1) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ds = [r["d"] for r in rows]
    ax.plot(ds, [r["bf16_tflops"] for r in rows], "o-", ms=3, label="bf16 x @ W")
    ax.plot(ds, [r["fp8_tflops"] for r in rows], "s-", ms=3, label="fp8 _scaled_mm (padded to 16), real FLOPs")
    for d in ds:
        if d % 16 == 0:
            ax.axvline(d, color="grey", lw=0.6, ls="--")
    ax.set_xlabel("K = N (dashed: multiples of 16)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{torch.cuda.get_device_name()}: {a.tokens} tokens", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    tmp = a.out / "alignment_sweep.tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, a.out / "alignment_sweep.png")
    print(f"wrote {a.out}/alignment_sweep.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
