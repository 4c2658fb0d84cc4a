"""When does transposing a linear layer's weight cost anything? The transposed_weight pair across token
counts and dtypes.

For the pair's 8192 -> 28672 projection and each token count M and dtype, one call of each way to get the
(in, out) operand (ch13/baseline_transposed_weight.py and its variants):

    transpose per call   x @ W.t().contiguous()   a copy of W made in every call (the pair's pitfall)
    transposed once      x @ Wt                    the copy made once, at load time (the pair's variant)
    transpose flag       F.linear(x, W)            no copy: cuBLAS reads W with its transpose flag (the baseline)

Each point is checked against an fp32 product with the harness's tolerance, before and after timing; the
three ways are timed in the same interleaved rounds with the harness's timer (common.timing.time_together,
new x before every sample), and the table gives ms, TFLOP/s, and each way's time over the flag's (above 1:
slower than the flag). fp32 runs as fp32 (no TF32). Writes transpose_sweep.json, .md and .png to --out.

    python ch13/transpose_sweep.py --out DIR [--tokens 1 16 128 1024 4096] [--dtypes bfloat16 float32]   (GPU only)
"""
from __future__ import annotations

import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import argparse
import json

import torch
import torch.nn.functional as F

from ch13.baseline_transposed_weight import linear_workload, shape
from ch13.sweep import cannot_sweep
from common.timing import time_together
from common.verify import verify_outputs

WAYS = ("transpose per call", "transposed once", "transpose flag")
PRECISION = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def ways(x: torch.Tensor, w: torch.Tensor) -> dict:
    wt = w.t().contiguous()   # once
    return {WAYS[0]: lambda: x @ w.t().contiguous(), WAYS[1]: lambda: x @ wt, WAYS[2]: lambda: F.linear(x, w)}


def sweep(tokens: list[int], dtypes: list[str], budget_s: float, log=print) -> list[dict]:
    _, k, n = shape("cuda", quick=False)
    dev = torch.device("cuda")
    rows = []
    for dtype in dtypes:
        for m in tokens:
            wl = linear_workload(0, dev, m, k, n, getattr(torch, dtype))
            x, w = wl.inputs["x"], wl.inputs["w"]
            fresh = [torch.randn_like(x) for _ in range(2)]
            fns = ways(x, w)
            row = {"dtype": dtype, "tokens": m, "flops": wl.flops}

            def check(when: str) -> None:   # each way against an fp32 product of the x fed last
                ref = (x.float() @ w.float().t()).to(x.dtype)
                for way, fn in fns.items():
                    verdict = verify_outputs([ref], [fn()], PRECISION[dtype])   # the harness's tolerance
                    if not verdict.ok:
                        raise SystemExit(f"error: {way} at {m} tokens, {dtype}, {when}: {verdict.message}")
                    row[f"{way} error"] = max(row.get(f"{way} error", 0.0), verdict.rel_err)
            check("before timing")
            # the three ways in the same interleaved rounds, new x before every sample; the large products
            # warm the chip up as a compute-bound pair's are
            timings = time_together(fns, dev, budget_s=budget_s, feed=lambda i: x.copy_(fresh[i % 2]),
                                    compute_bound=2.0 * m > 250 * x.element_size())
            for way, t in timings.items():
                row[way] = t.median_ms
            check("after timing")
            log(f"{dtype:9s} {m:5d} tokens: " + "  ".join(f"{w_} {row[w_]:.4f} ms" for w_ in WAYS), flush=True)
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| dtype | tokens | " + " | ".join(f"{w} ms" for w in WAYS) + " | TFLOP/s (flag) | "
             "per call: time / flag's | once: time / flag's |", "|" + " --- |" + " ---: |" * (len(WAYS) + 4)]
    for r in rows:
        flag = r[WAYS[2]]
        lines.append(f"| {r['dtype']} | {r['tokens']} | " + " | ".join(f"{r[w]:.4f}" for w in WAYS) +
                     f" | {r['flops'] / (flag * 1e-3) / 1e12:.1f} | {r[WAYS[0]] / flag:.2f}× | {r[WAYS[1]] / flag:.2f}× |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    dtypes = sorted({r["dtype"] for r in rows})
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5 * len(dtypes), 3.5), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        rs = [r for r in rows if r["dtype"] == dtype]
        for way, style in zip(WAYS, ("o-", "s-", "^--")):
            ax.plot([r["tokens"] for r in rs], [r[way] for r in rs], style, label=way)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens (M)")
        ax.set_ylabel("ms per call")
        ax.set_title(f"{dtype}, 8192 -> 28672", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(torch.cuda.get_device_name(), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 16, 128, 1024, 4096],
                    help="token counts M, the rows of x (default 1 16 128 1024 4096)")
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"], choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--budget", type=float, default=0.5, help="seconds of timing per point and way")
    ap.add_argument("--out", type=pathlib.Path, required=True, help="folder for the results")
    a = ap.parse_args(argv)
    refused = cannot_sweep(a.out, "cuBLAS products", triton=False)
    if refused:
        return refused
    rows = sweep(a.tokens, a.dtypes, a.budget)
    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "tf32": torch.backends.cuda.matmul.allow_tf32}
    (a.out / "transpose_sweep.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
    (a.out / "transpose_sweep.md").write_text(f"# Transposed weights on {meta['device']}\n\n" + table(rows))
    plot(rows, a.out / "transpose_sweep.png")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
