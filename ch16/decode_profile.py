#!/usr/bin/env python3
"""Where a decode step's time goes, variant by variant: kernel classes per token against the floor, and
each variant's logits against an fp32 run of the same step.

    python ch16/decode_profile.py [--variants NAME ...] [--out DIR]     (needs a CUDA GPU)
    python ch16/decode_profile.py --redraw DIR/decode_profile.json     (the table and figure again, anywhere)

For each variant of the decode_graph pair (and the candidate steps below), on the pair's workload (the
llama-1b configuration, bf16, batch 1, context 1024):
1. time per step: CUDA events over 200 back-to-back calls (after 10 warm-up calls);
2. torch.profiler over 20 calls: every GPU kernel's time, summed by class (matrix products, attention,
   norms and element-wise, cache writes and copies), per token; the rest of the step's time is idle
   (the GPU waiting on the host or on launches). Classes go by kernel name, so they are approximate:
   where attention is two batched matmuls (the model's attend()) cuBLAS runs them and they count as
   matrix products; "cache writes and copies" holds every copy kernel, dtype casts (eager's bf16 <-> fp32
   round trips) and the rotary's cat among them; the JSON keeps the 40 longest kernels of each variant;
3. the logits of one call against the fp32 step (the same weights and cache cast to fp32) and against the
   eager bf16 step (relative error), and whether its greedy token is the fp32 step's (one token: the fp32
   step's top-two margin is reported beside it). A variant whose logits differ from the eager step's beyond
   its precision's tolerance (bf16's; fp8's for float8 weights) is reported as failed, with no time.
A variant that fails makes the exit status 1; the others still run. Writes DIR/decode_profile.json (after
each variant, so a stopped run keeps what it measured), DIR/decode_profile.md (the table) and
DIR/decode_profile.png (one stacked bar per variant against the floor: every weight read once at the measured
copy rate). A measurement script, not a pair: the pair's figures come from benchmark.py.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402

CLASSES = ("matrix products", "attention", "norms and element-wise", "cache writes and copies", "idle")
# Kernel names, lower-cased, by class; checked in this order (a name matching two classes takes the first).
PATTERNS = (
    ("attention", ("flash", "fmha", "attention", "sdpa", "paged_decode", "_attn", "softmax", "cudnn",
                   "_merge_kernel")),
    ("matrix products", ("gemv", "gemm", "nvjet", "cutlass", "xmma", "splitk", "cublas", "sm90_", "sm80_",
                         "triton_tem", "_mm_", "matmul", "_linear_kernel", "_qkv_kernel")),
    ("cache writes and copies", ("memcpy", "memset", "index_copy", "indexcopy", "index_put", "scatter",
                                 "copy_kernel", "catarray")),
)


def kernel_class(name: str) -> str:
    low = name.lower()
    for cls, keys in PATTERNS:
        if any(k in low for k in keys):
            return cls
    return "norms and element-wise"


NAMES = ("eager", "graph", "compile (rounding like eager)", "compile", "compile, fused weights",
         "compile, fused weights, SDPA", "compile, fused weights, Triton GEMV",
         "compile, fused weights, SDPA, Triton GEMV", "fused (pair variant)", "fused, Inductor PDL",
         "PDL step (pair variant)", "PDL step, PDL off", "PDL step, fp8 weights (pair variant)")


def candidates():
    """name -> prepare(w), in NAMES' order: the pair's variants and steps not (yet) in the pair."""
    from ch16 import baseline_decode_graph as eager, optimized_decode_graph as graph
    from ch16 import optimized_decode_graph_compile as comp, optimized_decode_graph_fused as fused
    from ch16 import optimized_decode_graph_pdl as pdl, optimized_decode_graph_pdl_fp8 as pdl_fp8
    from ch16.fused_step import prepare_fused, sdpa_attention
    from ch16.pdl_step import prepare_pdl
    from ch16.gemv import linear

    default = dict(round_like_eager=False)   # Inductor's own rounding (fp32 intermediates)
    table = {
        "eager": eager.prepare,
        "graph": graph.prepare,
        "compile (rounding like eager)": comp.prepare,
        "compile": lambda w: comp.prepare(w, **default),
        "compile, fused weights": lambda w: prepare_fused(w, **default),
        "compile, fused weights, SDPA": lambda w: prepare_fused(w, attention=sdpa_attention, **default),
        "compile, fused weights, Triton GEMV": lambda w: prepare_fused(w, linear=linear, **default),
        "compile, fused weights, SDPA, Triton GEMV":
            lambda w: prepare_fused(w, attention=sdpa_attention, linear=linear, **default),
        "fused (pair variant)": fused.prepare,
        # Inductor's kernels launched with programmatic dependent launch (Hopper): each may start while the
        # one before drains, waiting (griddepcontrol.wait) only where it reads that kernel's output
        "fused, Inductor PDL": lambda w: prepare_fused(w, attention=sdpa_attention, linear=linear,
                                                       inductor={"triton.enable_pdl": True}),
        "PDL step (pair variant)": pdl.prepare,
        "PDL step, PDL off": lambda w: prepare_pdl(w, pdl=False),   # the same 97 kernels, launched plainly
        "PDL step, fp8 weights (pair variant)": pdl_fp8.prepare,
    }
    assert tuple(table) == NAMES
    return table


def per_step_ms(fn, n=200, warmup=10) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n


def kernel_times(fn, n=20) -> dict:
    """GPU time per step by kernel name (µs) and by class, from torch.profiler over n back-to-back calls."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    kernels: dict[str, dict] = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        k = kernels.setdefault(e.name, {"us": 0.0, "count": 0})
        k["us"] += e.time_range.elapsed_us() / n
        k["count"] += 1 / n
    by_class = dict.fromkeys(CLASSES[:-1], 0.0)
    counts = dict.fromkeys(CLASSES[:-1], 0.0)
    for name, k in kernels.items():
        by_class[kernel_class(name)] += k["us"]
        counts[kernel_class(name)] += k["count"]
    top = sorted(kernels.items(), key=lambda kv: -kv[1]["us"])[:40]
    return {"class_us": by_class, "class_kernels": counts,
            "top_kernels": [{"name": name[:160], "class": kernel_class(name), "us": round(k["us"], 2),
                             "count": round(k["count"], 2)} for name, k in top]}


def precision_of(prepare) -> str:
    """The precision a step is verified at: its pair file's PRECISION (the float8 variant's "fp8"), else bf16."""
    return getattr(sys.modules.get(getattr(prepare, "__module__", "")), "PRECISION", "bf16")


def compare(out, ref, truth, precision: str = "bf16") -> dict:
    """out against the eager bf16 step and the fp32 step; greedy tokens where the fp32 margin is clear. A step
    whose logits differ from the eager step's beyond `precision`'s tolerance raises: its time is no result."""
    from common.verify import verify_outputs
    o, r, t = (x.float().cpu().reshape(-1) for x in (out, ref, truth))
    top2 = t.topk(2)
    margin = float(top2.values[0] - top2.values[1])
    vs_eager = verify_outputs([r], [o], precision)
    if not vs_eager.ok:
        raise ValueError(f"its logits differ from the eager step's beyond {precision}'s tolerance: {vs_eager.message}")
    vs_truth = verify_outputs([t], [o], "bf16")
    return {"rel_vs_eager": vs_eager.rel_err, "rel_vs_fp32": vs_truth.rel_err, "fp32_top2_margin": margin,
            "token": int(o.argmax()), "fp32_token": int(top2.indices[0]),
            "token_agrees": int(o.argmax()) == int(top2.indices[0])}


def draw(doc: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [(name, r) for name, r in doc["variants"].items() if "class_us" in r]
    if not rows:
        return
    colours = dict(zip(CLASSES, ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#c7c7c7")))
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.6))
    times = sorted(r["ms"] for _, r in rows)
    # a step far slower than the rest (eager) would squeeze them: cut its bar at the axis and print its time
    right = times[-2] * 1.3 if len(times) > 1 and times[-1] > 3 * times[-2] else times[-1] * 1.15
    for i, (name, r) in enumerate(rows):
        us = {cls: (r["class_us"][cls] if cls != "idle" else r["idle_us"]) for cls in CLASSES}
        # overlapping kernels (PDL) add up to more than the step: draw each class's share of the step
        scale = min(1.0, r["ms"] * 1e3 / sum(us.values())) if sum(us.values()) else 1.0
        left = 0.0
        for cls in CLASSES:
            ax.barh(i, us[cls] * scale / 1e3, left=left, color=colours[cls], label=cls if i == 0 else None,
                    hatch="//" if scale < 0.999 else None, edgecolor="white" if scale < 0.999 else None, lw=0)
            left += us[cls] * scale / 1e3
        note = " (kernels overlap: shares of the step)" if scale < 0.999 else ""
        ax.text(min(left, right), i, f" {r['ms']:.3f} ms{note}", va="center", fontsize=8)
    ax.set_xlim(0, right)
    ax.axvline(doc["floor_ms"], color="k", ls="--", lw=1)
    ax.text(doc["floor_ms"], len(rows) - 0.4, f" floor {doc['floor_ms']:.3f} ms", fontsize=8)
    ax.set_yticks(range(len(rows)), [n for n, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms per token (GPU time by kernel class; idle = step time minus kernel time; hatched: kernels "
                  "overlap, classes drawn as shares of the step)", fontsize=8)
    ax.set_title(f"decode step, {doc['workload']} on {doc['gpu']}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def markdown(doc: dict) -> str:
    """The per-token table by kernel class, one row per variant (µs; idle = step time minus kernel time)."""
    lines = [f"# Decode step by kernel class: {doc['workload']} on {doc['gpu']}", "",
             f"torch {doc['torch']}. Floor: {doc['bytes_per_step'] / 1e9:.3f} GB per step at the measured copy rate "
             f"{doc['copy_gbps']:.0f} GB/s = {doc['floor_ms']:.3f} ms. µs per token from torch.profiler over 20 "
             "calls; ms per token from CUDA events over 200 back-to-back calls. Where attention is two batched "
             "matmuls (eager, graph, compile) its matmuls count as matrix products. Where kernels overlap "
             "(launched with programmatic dependent launch, each waits inside the kernel for the one before), "
             "their times add up to more than the step, and idle reads 0.", "",
             "| variant | ms/token | % of floor | " + " | ".join(CLASSES) + " | kernels | rel. error vs fp32 | "
             "vs eager bf16 | greedy token = fp32's |",
             "| --- | ---: | ---: | " + " | ".join("---:" for _ in CLASSES) + " | ---: | ---: | ---: | --- |"]
    for name, r in doc["variants"].items():
        if "error" in r:   # the header's 12 columns: the name, the error, 10 empty
            first = r["error"].splitlines()[0] if r["error"] else ""
            lines.append(f"| {name} | **failed**: {first[:200]} |" + " |" * (len(CLASSES) + 5))
            continue
        us = [r["class_us"][c] for c in CLASSES[:-1]] + [r["idle_us"]]
        lines.append(f"| {name} | {r['ms']:.3f} | {r['pct_of_floor']:.1f} | " + " | ".join(f"{u:.0f}" for u in us) +
                     f" | {sum(r['class_kernels'].values()):.0f} | {r['rel_vs_fp32']:.2e} | {r['rel_vs_eager']:.2e} | "
                     f"{'yes' if r['token_agrees'] else 'no'} |")
    return "\n".join(lines) + "\n"


def write_report(doc: dict, out_dir: Path) -> None:
    (out_dir / "decode_profile.json").write_text(json.dumps(doc, indent=1))
    (out_dir / "decode_profile.md").write_text(markdown(doc))
    draw(doc, out_dir / "decode_profile.png")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()),
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--variants", nargs="+", metavar="NAME", help="a subset, by name, quoted (default: all): "
                    + "; ".join(f'"{n}"' for n in NAMES))
    ap.add_argument("--out", default="profiles/decode_profile", help="folder for the JSON and the figure")
    ap.add_argument("--copy-gbps", type=float, help="the copy rate for the floor (default: this GPU's measured "
                    "ceiling, from `python benchmark.py --peaks`)")
    ap.add_argument("--redraw", metavar="JSON", help="write the table and figure again from a run's JSON "
                    "(beside it; no GPU needed)")
    a = ap.parse_args(argv)
    if a.redraw:
        path = Path(a.redraw)
        try:
            write_report(json.loads(path.read_text()), path.parent)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: cannot redraw from {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        print(f"wrote decode_profile.md and decode_profile.png in {path.parent}")
        return 0
    unknown = [n for n in a.variants or [] if n not in NAMES]
    if unknown:
        print(f"error: unknown variant(s) {unknown}; known: {list(NAMES)}", file=sys.stderr)
        return 2
    from ch16.decode import decode_workload, gpu_copy_rate
    from ch16.model import KVCache, cast_model, decode_step
    gbps, error = gpu_copy_rate("ch16/decode_profile.py", a.copy_gbps)
    if error:
        print(error, file=sys.stderr)
        return 2
    table = candidates()
    w = decode_workload(0, "cuda", False, batch=1, context=1024)
    model = w.inputs["model"]
    k0, v0 = w.inputs["k_cache"].clone(), w.inputs["v_cache"].clone()

    def reset():  # every variant starts from the prefilled cache (a step writes one position of it)
        w.inputs["k_cache"].copy_(k0)
        w.inputs["v_cache"].copy_(v0)
    ref = table["eager"](w)().float().cpu()   # the eager bf16 step, whatever variants are selected
    reset()
    with torch.no_grad():
        m32 = cast_model(copy.deepcopy(model), dtype=torch.float32)
        truth = decode_step(m32, KVCache(k0.float(), v0.float()), w.inputs["token"], w.inputs["input_pos"])
        truth = truth.float().cpu()
        del m32
    torch.cuda.empty_cache()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "workload": w.note,
           "bytes_per_step": w.bytes_moved, "copy_gbps": gbps, "floor_ms": w.bytes_moved / gbps / 1e6,
           "variants": {}}
    for name in a.variants or list(table):
        print(f"== {name}", flush=True)
        row: dict = {}
        doc["variants"][name] = row
        try:
            torch._dynamo.reset()
            reset()
            t0 = time.perf_counter()
            fn = table[name](w)
            torch.cuda.synchronize()
            row["prepare_s"] = round(time.perf_counter() - t0, 1)
            reset()
            row.update(compare(fn().float().cpu(), ref, truth, precision_of(table[name])))
            row["ms"] = per_step_ms(fn)
            row.update(kernel_times(fn))
            row["idle_us"] = max(0.0, row["ms"] * 1e3 - sum(row["class_us"].values()))
            row["pct_of_floor"] = 100 * doc["floor_ms"] / row["ms"]
            del fn
        except Exception as exc:  # one variant's failure is reported, the others still run
            row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
        print(json.dumps({k: v for k, v in row.items() if k != "top_kernels"}), flush=True)
        (out_dir / "decode_profile.json").write_text(json.dumps(doc, indent=1))   # kept if a later variant hangs
    write_report(doc, out_dir)
    print(f"wrote decode_profile.json, .md and .png in {out_dir}")
    failed = [name for name, row in doc["variants"].items() if "error" in row]
    if failed:
        print(f"error: {len(failed)} variant(s) failed: {'; '.join(failed)} (decode_profile.md says why)",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
