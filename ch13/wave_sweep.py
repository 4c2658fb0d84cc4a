"""Tile and wave quantization: a GEMM's TFLOP/s as N grows one step at a time, against the count of its tiles.

    python ch13/wave_sweep.py [--out DIR] [--n-from 1024] [--n-to 5120] [--n-step 32] [--k 4096]

One fixed Triton tile (ch13/triton_kernels.py: 128 x 128 outputs, K step 64, 4 stages, 8 warps; one program
per output tile, one program per SM at a time on an H100, by shared memory) computes C = A B for M = 1536
(12 tile rows), K = 4096 and every N from --n-from to --n-to in steps of --n-step. Two kinds of waste show:

    tile quantization   N = 128 j + 32 needs j + 1 tile columns; the last is 3/4 empty but costs a full tile
    wave quantization   132 SMs run 132 tiles at a time: 12 x 11 = 132 tiles fill one wave, 12 x 12 = 144
                        need a second wave in which 12 of the 132 SMs work

The prediction per point: the best measured rate times the share of the work that is useful,
    useful = (M N) / (tiles x 128 x 128)                (tile efficiency)
           x tiles / (ceil(tiles / SMs) x SMs)          (wave efficiency)
so the sawtooth is drawn before it is measured. cuBLAS (torch.matmul, bf16) runs beside it: a library that
picks its tile per shape, whose steps fall elsewhere. Per point: tiles, waves, both efficiencies, each
kernel's time (a CUDA graph of 10 calls, the median of 30 replays) and TFLOP/s of useful work, every output
checked against an fp32 product. Writes wave_sweep.json, wave_sweep.md and wave_sweep.png. GPU only.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ch13.persistent_sweep import CONFIG, M, waves  # noqa: E402
from ch13.sweep import cannot_sweep, graph_time_ms  # noqa: E402


def efficiency(n: int, tiles: int, sms: int) -> tuple[float, float]:
    """(tile efficiency, wave efficiency) of an M x n product cut into `tiles` CONFIG tiles on `sms` SMs."""
    tile_eff = (M * n) / (tiles * CONFIG[0] * CONFIG[1])
    wave_eff = tiles / (math.ceil(tiles / sms) * sms)
    return tile_eff, wave_eff


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "profiles" / "runs" / "wave_sweep", help="output folder")
    p.add_argument("--n-from", type=int, default=1024, help="the first N, a multiple of 8 (default 1024)")
    p.add_argument("--n-to", type=int, default=5120, help="the last N, included if a step lands on it (default 5120)")
    p.add_argument("--n-step", type=int, default=32, help="a multiple of 8 (16-byte rows for bf16)")
    p.add_argument("--k", type=int, default=4096, help="the inner dimension K (default 4096)")
    a = p.parse_args(argv)
    if a.n_step % 8 or a.n_from % 8 or a.n_from < 8 or a.n_to < a.n_from:
        print("error: --n-from and --n-step must be multiples of 8, and --n-to at least --n-from", file=sys.stderr)
        return 2
    refused = cannot_sweep(a.out, "Triton kernels")
    if refused:
        return refused
    import torch
    from ch13 import triton_kernels as tk
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernels = {"Triton, 128x128 tile": lambda x, w, o: tk.gemm(x, w, None, o, gelu=False, config=CONFIG),
               "cuBLAS": lambda x, w, o: torch.matmul(x, w, out=o)}
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, a.k, device="cuda", generator=g).to(torch.bfloat16)
    w_all = (torch.randn(a.k, a.n_to, device="cuda", generator=g) / a.k ** 0.5).to(torch.bfloat16)
    rows, bad = [], []
    for n in range(a.n_from, a.n_to + 1, a.n_step):
        w = w_all[:, :n].contiguous()
        ref = x.float() @ w.float()
        tiles = tk.tiles(M, n, CONFIG)
        tile_eff, wave_eff = efficiency(n, tiles, sms)
        row = {"N": n, "tiles": tiles, "waves": waves(tiles, sms), "tile_eff": tile_eff, "wave_eff": wave_eff,
               "ms": {}, "error": {}}
        for name, run in kernels.items():
            out = torch.full((M, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            run(x, w, out)
            errs = [float((out.float() - ref).norm() / ref.norm())]      # after the first call...
            row["ms"][name] = graph_time_ms(lambda i: run(x, w, out), 10)[0]
            errs.append(float((out.float() - ref).norm() / ref.norm()))  # ...and after the timed replays
            row["error"][name] = float("nan") if any(math.isnan(e) for e in errs) else max(errs)  # max() drops a NaN
            if not row["error"][name] < 2e-2:
                bad.append((n, name, row["error"][name]))
        rows.append(row)
        print(f"N={n}: {tiles} tiles, {row['waves']:.2f} waves, useful {tile_eff * wave_eff:.0%}: " +
              ", ".join(f"{k} {v:.4f} ms" for k, v in row["ms"].items()), flush=True)
    flops = lambda r: 2.0 * M * r["N"] * a.k  # noqa: E731
    name0 = next(iter(kernels))
    best = max(flops(r) / r["ms"][name0] / 1e9 for r in rows)
    for r in rows:
        r["predicted_tflops"] = best * r["tile_eff"] * r["wave_eff"]
    a.out.mkdir(parents=True, exist_ok=True)
    dev = torch.cuda.get_device_name()
    (a.out / "wave_sweep.json").write_text(json.dumps({"device": dev, "sms": sms, "config": CONFIG, "M": M, "K": a.k,
                                                      "torch": torch.__version__, "rows": rows}, indent=1) + "\n")
    lines = [f"# Tile and wave quantization ({dev}, {sms} SMs; Triton tile {CONFIG[0]}x{CONFIG[1]}, M = {M}, "
             f"K = {a.k}, bf16)", "",
             "TFLOP/s of useful work (2 M N K over the time; a CUDA graph of 10 calls, median of 30 replays). "
             "Predicted: the best Triton rate measured times tile efficiency times wave efficiency.", "",
             "| N | tiles | waves | tile eff. | wave eff. | predicted TFLOP/s | " +
             " | ".join(f"{k} TFLOP/s" for k in kernels) + " |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in kernels) + " |"]
    for r in rows:
        lines.append(f"| {r['N']} | {r['tiles']} | {r['waves']:.2f} | {r['tile_eff']:.0%} | {r['wave_eff']:.0%} | "
                     f"{r['predicted_tflops']:.0f} | " +
                     " | ".join(f"{flops(r) / r['ms'][k] / 1e9:.0f}" for k in kernels) + " |")
    lines += ["", "Every output against an fp32 product: relative error under 2e-2 at every N." if not bad
              else f"Wrong: {bad}"]
    (a.out / "wave_sweep.md").write_text("\n".join(lines) + "\n")
    _plot(rows, list(kernels), sms, flops, a.out / "wave_sweep.png", dev, a.k)
    print("\n".join(lines[-3:]))
    print(f"wrote {a.out}/wave_sweep.md")
    return 0 if not bad else 1


def _plot(rows, names, sms, flops, path, dev, k):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    ns = [r["N"] for r in rows]
    for name, style in zip(names, ("o-", "s-")):
        ax.plot(ns, [flops(r) / r["ms"][name] / 1e9 for r in rows], style, ms=3, lw=1, label=name)
    ax.plot(ns, [r["predicted_tflops"] for r in rows], "k--", lw=0.8, label="predicted: best x tile eff. x wave eff.")
    prev = None
    for r in rows:   # where a new wave starts: the first N whose tiles need one more wave than the N before
        wave_count = math.ceil(r["tiles"] / sms)
        if prev is not None and wave_count > prev:
            ax.axvline(r["N"], color="grey", lw=0.6)
        prev = wave_count
    ax.set(title=f"{dev}: M = {M}, K = {k}, bf16 (grey: a new wave of tiles starts)",
           xlabel="N", ylabel="TFLOP/s (useful work)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
