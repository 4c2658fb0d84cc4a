"""How the gap between no cache and a static KV cache grows with context: one decode step per context length.

For each context L, one request (batch 1 unless --batch) L tokens in, the time of one step:

    no cache     the whole prefix recomputed (L+1 tokens through the model): grows linearly with L
    cache        the static-cache step, eager
    cache+graph  the static-cache step replayed as a CUDA graph (GPU only)

with tokens/s and, for the cached step, the share of the bandwidth floor (weights + the KV read,
over the copy bandwidth given with --copy-gbps, measured by `benchmark.py --peaks`). The ways at one
context are timed as the harness times a pair's variants (common.timing.time_together: interleaved
rounds, CUDA events on a GPU), with a budget of --budget seconds a way.

Contexts the model has no positions for are dropped, with a line saying which: a step at context L
feeds position L, so L must be below the model's max_seq_len (4096 for the ~1B model; 512 for the
small one, which a CPU or --quick runs, so there the default list stops at 256).

    python ch16/kv_cache_sweep.py [--contexts 256 1024 4000] [--budget S] [--out DIR]
"""
from __future__ import annotations

import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import argparse
import json

import torch

from ch16.decode import capture_graph, served_model, step_work
from ch16.model import CONFIGS, KVCache, decode_step, forward_no_cache, prefill, random_tokens
from common.timing import time_together


def supported_contexts(cfg, contexts) -> tuple[list[int], list[int]]:
    """(kept, dropped): a step at context L writes and reads position L, and the rotary table stops at max_seq_len."""
    kept = [L for L in contexts if 0 < L < cfg.max_seq_len]
    return kept, [L for L in contexts if L not in kept]


@torch.no_grad()
def sweep(device, contexts, batch: int, quick: bool, copy_gbps: float | None, budget_s: float) -> list[dict]:
    model = served_model(device, quick)
    contexts, dropped = supported_contexts(model.cfg, contexts)
    if dropped:
        name = next((n for n, c in CONFIGS.items() if c == model.cfg), "this")
        print(f"contexts {' '.join(map(str, dropped))} dropped: the {name} model has positions 0-{model.cfg.max_seq_len - 1}"
              f" and a step at context L uses position L" + (" (the ~1B model runs on a GPU without --quick)"
                                                            if name == "small" else ""), flush=True)
    rows = []
    for L in contexts:
        prefix = random_tokens(model.cfg, (batch, L), L, device)
        token = random_tokens(model.cfg, (batch, 1), L + 1, device)
        cache = KVCache.empty(model.cfg, batch, L + 1, device, model.output.weight.dtype)
        prefill(model, prefix, cache)
        pos = torch.tensor([L], device=device)
        row = {"context": L, "batch": batch}
        ways = {"no_cache": lambda: forward_no_cache(model, torch.cat([prefix, token], 1)),
                "cache": lambda: decode_step(model, cache, token, pos)}
        if device.type == "cuda":
            ways["cache_graph"] = capture_graph(lambda: decode_step(model, cache, token, pos))
        for k, t in time_together(ways, device, budget_s=budget_s).items():
            row[f"{k}_ms"] = t.median_ms
        _, bytes_moved = step_work(model, batch, L + 1)
        row["floor_ms"] = bytes_moved / (copy_gbps * 1e9) * 1e3 if copy_gbps else None
        for k in ("no_cache", "cache", "cache_graph"):
            if f"{k}_ms" in row:
                row[f"{k}_tokens_per_s"] = batch / row[f"{k}_ms"] * 1e3
                if row["floor_ms"]:
                    row[f"{k}_pct_of_floor"] = 100 * row["floor_ms"] / row[f"{k}_ms"]
        rows.append(row)
        best = row.get("cache_graph_ms", row["cache_ms"])
        print(f"context {L:6d}: no cache {row['no_cache_ms']:8.2f} ms, cache {row['cache_ms']:7.2f} ms"
              + (f", cache+graph {row['cache_graph_ms']:6.3f} ms" if "cache_graph_ms" in row else "")
              + (f" ({100 * row['floor_ms'] / best:.0f}% of the {row['floor_ms']:.3f} ms floor)" if row["floor_ms"] else "")
              + f"; gap {row['no_cache_ms'] / best:.1f}x", flush=True)
        del cache
    return rows


def plot(rows, path):
    """ms per step of each way against context, log-log, and the bandwidth floor where --copy-gbps gave one."""
    from common.figures import chart  # matplotlib: heavy, and only for a figure (pair files import this module)

    def draw(ax):
        xs = [r["context"] for r in rows]
        for k, label in (("no_cache", "no cache"), ("cache", "static cache, eager"),
                         ("cache_graph", "static cache, graph")):
            if f"{k}_ms" in rows[0]:
                ax.plot(xs, [r[f"{k}_ms"] for r in rows], "o-", label=label)
        if rows[0].get("floor_ms"):
            ax.plot(xs, [r["floor_ms"] for r in rows], "k--", label="bandwidth floor")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel("ms per decode step")
        ax.legend(fontsize=7)
    chart(path, draw)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                    help="cuda or cpu (default: cuda where a GPU is visible; a CPU runs the small model)")
    ap.add_argument("--contexts", type=int, nargs="+", default=[128, 256, 512, 1024, 2048, 4000],
                    help="context lengths L, one step each (default 128 256 512 1024 2048 4000; those the model "
                         "has no positions for are dropped)")
    ap.add_argument("--batch", type=int, default=1, help="requests decoded together, each L tokens in (default 1)")
    ap.add_argument("--quick", action="store_true", help="the small model")
    ap.add_argument("--copy-gbps", type=float, help="measured copy bandwidth (benchmark.py --peaks), for the floor")
    ap.add_argument("--budget", type=float, default=1.0, metavar="S",
                    help="the harness's timing budget per way and context, s (default 1)")
    ap.add_argument("--out", type=pathlib.Path,
                    help="folder for kv_cache_sweep.json and .png (default: print the table only)")
    a = ap.parse_args(argv)
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: ch16/kv_cache_sweep.py --device cuda needs a CUDA GPU; none is visible to PyTorch", file=sys.stderr)
        return 2
    rows = sweep(device, a.contexts, a.batch, a.quick, a.copy_gbps, a.budget)
    if not rows:
        print("error: no context in --contexts fits the model's positions (see the line above)", file=sys.stderr)
        return 2
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        meta = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__,
                "budget_s": a.budget}
        (a.out / "kv_cache_sweep.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
        plot(rows, a.out / "kv_cache_sweep.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
