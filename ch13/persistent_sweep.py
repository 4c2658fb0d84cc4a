"""Where a persistent GEMM wins and where it does not: tiles, waves and time, shape by shape.

    python ch13/persistent_sweep.py [--out DIR] [--k 512 2048 8192]

The same Triton tile (ch13/triton_kernels.py: 128 x 128 outputs, K step 64, 4 stages, 8 warps; one such
program fits an H100 SM at a time, by shared memory) run three ways over M = 1536 and N = 128 x {11, 12, ...}:
one program per tile (the hardware starts each), persistent (one program per SM walking tiles pid, pid + 132,
...), and persistent with the last partial wave's tiles split along K over all the SMs (the data-parallel +
Stream-K hybrid). The tile counts straddle multiples of the SM count (132, 144, 264, 276, ...): a count just
past a multiple adds a wave that is almost empty, for every schedule that gives each tile to one program,
persistent or not; only splitting tiles fills it. What persistence alone can save is the per-tile start
(a launch slot, pointer set-up, pipeline fill), a share that grows as K shrinks.

Per shape: the tiles, the waves (tiles / SMs), each schedule's time (a CUDA graph of 10 calls, the median of
30 replays: kernel time, no host launch cost) and TFLOP/s, cuBLAS beside them. Writes persistent_sweep.json,
persistent_sweep.md and persistent_sweep.png (TFLOP/s over tiles per K; the waves' edges marked). GPU only.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ch13.sweep import cannot_sweep, graph_time_ms  # noqa: E402

CONFIG = (128, 128, 64, 4, 8)          # the pair's tile (ch13/baseline_persistent_gemm.py)
M = 1536                               # 12 tile rows
N_TILES = (11, 12, 16, 22, 23, 27, 33, 34)   # tile columns: 132, 144, 192, 264, 276, 324, 396, 408 tiles


def waves(tiles: int, sms: int) -> float:
    """Tiles over SMs, one program per SM at a time: 2.09 is two full waves and one with 9% of the SMs busy."""
    return tiles / sms


def tail_busy(tiles: int, sms: int) -> float:
    """The share of SMs with a tile in the last wave (1.0 when the tiles are a multiple of the SMs)."""
    rest = tiles % sms
    return 1.0 if rest == 0 else rest / sms


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "profiles" / "runs" / "persistent_sweep", help="output folder")
    p.add_argument("--k", type=int, nargs="+", default=[512, 2048, 8192], help="K values (default 512 2048 8192)")
    a = p.parse_args(argv)
    refused = cannot_sweep(a.out, "Triton kernels")
    if refused:
        return refused
    import torch
    from ch13 import triton_kernels as tk
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # each schedule made for one output buffer (the persistent ones hold their split's tile sums and counts)
    schedules = {
        "one program per tile": lambda o: lambda x, w: tk.gemm(x, w, None, o, gelu=False, config=CONFIG),
        "persistent": lambda o: tk.PersistentGemm(o, CONFIG, sms, split_tail=False),
        "persistent, last wave split": lambda o: tk.PersistentGemm(o, CONFIG, sms, split_tail=True),
        "cuBLAS": lambda o: lambda x, w: torch.matmul(x, w, out=o),
    }
    rows = []
    for k in a.k:
        for nt in N_TILES:
            n = nt * CONFIG[1]
            g = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(M, k, device="cuda", generator=g).to(torch.bfloat16)
            w = (torch.randn(k, n, device="cuda", generator=g) / k ** 0.5).to(torch.bfloat16)
            ref = (x.float() @ w.float())
            tiles = tk.tiles(M, n, CONFIG)
            row = {"M": M, "N": n, "K": k, "tiles": tiles, "waves": waves(tiles, sms),
                   "tail_busy": tail_busy(tiles, sms), "ms": {}, "error": {}}
            for name, make in schedules.items():
                out = torch.full((M, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                try:
                    run = make(out)
                    run(x, w)
                    first = float((out.float() - ref).norm() / ref.norm())
                    row["ms"][name] = graph_time_ms(lambda i: run(x, w), 10)[0]
                    # the output after the graph's replays too: the split's sums and counts reset every call
                    row["error"][name] = max(first, float((out.float() - ref).norm() / ref.norm()))
                except Exception as e:  # a schedule that does not compile here: say so, go on
                    row["error"][name], row["ms"][name] = f"{type(e).__name__}: {str(e)[:120]}", float("nan")
            rows.append(row)
            print(f"K={k} N={n}: {tiles} tiles, {row['waves']:.2f} waves: " + ", ".join(
                f"{name} {ms:.4f} ms" for name, ms in row["ms"].items()), flush=True)
    flops = lambda r: 2.0 * r["M"] * r["N"] * r["K"]  # noqa: E731
    a.out.mkdir(parents=True, exist_ok=True)
    dev = torch.cuda.get_device_name()
    (a.out / "persistent_sweep.json").write_text(json.dumps({"device": dev, "sms": sms, "config": CONFIG,
                                                            "torch": torch.__version__, "rows": rows}, indent=1) + "\n")
    names = list(schedules)
    lines = [f"# Persistent against one program per tile ({dev}, {sms} SMs, tile {CONFIG[0]}x{CONFIG[1]}, "
             f"K step {CONFIG[2]}, {CONFIG[3]} stages, {CONFIG[4]} warps)", "",
             "Kernel time per call (a CUDA graph of 10 calls, median of 30 replays). Speedups: over one program per "
             "tile. Last wave: the share of SMs with a tile in it.", "",
             "| M x N x K | tiles | waves | last wave | " + " | ".join(f"{n} ms" for n in names)
             + " | persistent speedup | split speedup | best TFLOP/s (Triton) |",
             "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in names) + " | ---: | ---: | ---: |"]
    for r in rows:
        base = r["ms"][names[0]]
        best = min(r["ms"][n] for n in names[:3])
        lines.append(f"| {r['M']} x {r['N']} x {r['K']} | {r['tiles']} | {r['waves']:.2f} | {r['tail_busy']:.0%} | "
                     + " | ".join(f"{r['ms'][n]:.4f}" for n in names)
                     + f" | {base / r['ms'][names[1]]:.3f}x | {base / r['ms'][names[2]]:.3f}x | "
                     f"{flops(r) / best / 1e9:.0f} |")
    bad = [(r["N"], r["K"], n, e) for r in rows for n, e in r["error"].items() if isinstance(e, str) or e > 2e-2]
    lines += ["", "Every schedule's output against an fp32 product, after its first call and after the timed replays: "
              "relative error under 2e-2 at every shape."
              if not bad else f"Wrong or failed: {bad}"]
    (a.out / "persistent_sweep.md").write_text("\n".join(lines) + "\n")
    _plot(rows, names, sms, a.out / "persistent_sweep.png", flops)
    print("\n".join(lines))
    print(f"wrote {a.out}/persistent_sweep.md")
    return 0 if not bad else 1


def _plot(rows, names, sms, path, flops):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ks = sorted({r["K"] for r in rows})
    fig, axes = plt.subplots(1, len(ks), figsize=(5 * len(ks), 4), squeeze=False)
    for ax, k in zip(axes[0], ks):
        rs = [r for r in rows if r["K"] == k]
        for name, style in zip(names, ("o-", "s-", "^--", "k:")):
            ax.plot([r["tiles"] for r in rs], [flops(r) / r["ms"][name] / 1e9 for r in rs], style, label=name, ms=4)
        for edge in range(sms, max(r["tiles"] for r in rs) + 1, sms):
            ax.axvline(edge, color="grey", lw=0.6)
        ax.set(title=f"K = {k}", xlabel=f"output tiles (grey: multiples of {sms} SMs)", ylabel="TFLOP/s")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
