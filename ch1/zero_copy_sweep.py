"""Zero copy against copy-then-compute across batch sizes, for data read once and data read twice.

For each batch of N pinned float32 224x224 RGB images (the zero_copy pairs' batch), one call of:

    copy, 1 pass      one DMA into a device buffer, then normalize_channels on it (baseline_zero_copy)
    zero copy, 1 pass normalize_channels on the pinned buffer itself (optimized_zero_copy)
    copy, 2 passes    one DMA, then standardize_images' two kernels (baseline_zero_copy_reuse)
    zero copy, 2 passes  both kernels on the pinned buffer: the link crossed twice (the pitfall)
    DMA alone         the copy without a kernel after it: what the copy-then-compute rows spend on the link

Each point is checked against its copy-then-compute twin (the same kernels, so equal bits), then the modes
are timed in the same interleaved rounds with the harness's timer (common.timing.time_together), new values
written into the pinned batch before every sample, after the calls still reading it have finished. It reports ms per call, GB/s of input (the batch's bytes over the time) against the
measured host-to-device ceiling, and writes zero_copy_sweep.json, .md and .png to --out.

    python ch1/zero_copy_sweep.py --out DIR [--batches 1 4 16 64 256] [--budget 0.5]   (GPU only)
"""
from __future__ import annotations

import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import argparse
import json

import torch

from ch1.image_kernels import normalize_channels, standardize_images
from common.timing import time_together

MODES = ("copy, 1 pass", "zero copy, 1 pass", "copy, 2 passes", "zero copy, 2 passes", "DMA alone")


def calls(images: torch.Tensor) -> dict:
    """The four timed calls of one batch, each with buffers allocated once."""
    dev = torch.device("cuda")
    staged = torch.empty(images.shape, device=dev)
    outs = [torch.empty(images.shape, dtype=torch.bfloat16, device=dev) for _ in MODES]
    stats = [torch.empty(2, images.shape[0], device=dev) for _ in range(2)]

    def copy_then(fn, *args):
        staged.copy_(images, non_blocking=True)
        return fn(staged, *args)
    return {MODES[0]: lambda: copy_then(normalize_channels, outs[0]),
            MODES[1]: lambda: normalize_channels(images, outs[1]),
            MODES[2]: lambda: copy_then(standardize_images, outs[2], stats[0]),
            MODES[3]: lambda: standardize_images(images, outs[3], stats[1]),
            MODES[4]: lambda: staged.copy_(images, non_blocking=True)}


def feed_host(dst: torch.Tensor, src: torch.Tensor) -> None:
    """New values into a pinned host buffer, outside the timing: after the calls that may still read it (a
    zero-copy kernel or a DMA in flight) have finished, as the harness does for host inputs (common.run)."""
    torch.cuda.current_stream().synchronize()
    dst.copy_(src)


def sweep(batches: list[int], budget_s: float, log=print) -> list[dict]:
    rows = []
    for n in batches:
        g = torch.Generator().manual_seed(n)
        values = [torch.rand(n, 3, 224, 224, generator=g) for _ in range(2)]
        images = values[0].pin_memory()
        fns = calls(images)
        for twin, zero in ((MODES[0], MODES[1]), (MODES[2], MODES[3])):
            if not torch.equal(fns[twin](), fns[zero]()):
                raise SystemExit(f"error: {zero} differs from {twin} at batch {n}")
        row = {"batch": n, "input_mb": images.numel() * 4 / 1e6}
        timings = time_together(fns, torch.device("cuda"), budget_s=budget_s,   # the modes in the same rounds
                                feed=lambda i: feed_host(images, values[i % 2]))
        for mode, t in timings.items():
            row[mode] = t.median_ms
        log(f"batch {n:4d} ({row['input_mb']:7.1f} MB): " +
            "  ".join(f"{m} {row[m]:.4f} ms" for m in MODES), flush=True)
        rows.append(row)
    return rows


def table(rows: list[dict], h2d_gbps: float | None) -> str:
    head = ("| images | input MB | " + " | ".join(f"{m} ms (GB/s)" for m in MODES) +
            " | zero copy over copy, 1 pass | 2 passes |")
    lines = [head, "|" + " ---: |" * (len(MODES) + 4)]
    for r in rows:
        cells = [f"{r[m]:.4f} ({r['input_mb'] / r[m]:.1f})" for m in MODES]   # MB/ms = GB/s
        lines.append(f"| {r['batch']} | {r['input_mb']:.1f} | " + " | ".join(cells) +
                     f" | {r[MODES[0]] / r[MODES[1]]:.2f}× | {r[MODES[2]] / r[MODES[3]]:.2f}× |")
    note = f"\nMeasured host-to-device ceiling: {h2d_gbps:.1f} GB/s (pinned DMA, benchmark.py --peaks).\n" if h2d_gbps else ""
    return "\n".join(lines) + "\n" + note


def plot(rows: list[dict], h2d_gbps: float | None, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.8))
    xs = [r["input_mb"] for r in rows]
    for mode, style in zip(MODES, ("o-", "s-", "o--", "s--", "k.:")):
        ax.plot(xs, [r["input_mb"] / r[mode] for r in rows], style, label=mode)
    if h2d_gbps:
        ax.axhline(h2d_gbps, color="k", lw=0.8, ls=":", label=f"DMA ceiling {h2d_gbps:.0f} GB/s")
    ax.set_xscale("log")
    ax.set_xlabel("input batch (MB, pinned host memory)")
    ax.set_ylabel("input GB/s (batch bytes / time)")
    ax.set_title(f"Zero copy vs copy-then-compute, {torch.cuda.get_device_name()}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Writes zero_copy_sweep.json, .md and .png to --out.")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64, 256], help="images per batch")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds of timing per point and mode")
    ap.add_argument("--out", type=pathlib.Path, required=True, help="folder for the results")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: ch1/zero_copy_sweep.py needs a CUDA GPU; none is visible to PyTorch", file=sys.stderr)
        return 2
    from common.peaks import load_or_measure
    h2d = load_or_measure(torch.device("cuda")).get("h2d_gbps")
    rows = sweep(a.batches, a.budget)
    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "h2d_gbps": h2d}
    (a.out / "zero_copy_sweep.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
    (a.out / "zero_copy_sweep.md").write_text(f"# Zero copy sweep on {meta['device']}\n\n" + table(rows, h2d))
    plot(rows, h2d, a.out / "zero_copy_sweep.png")
    print(table(rows, h2d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
