"""What the autotuner picks, per shape, and why: every configuration of GEMM_CONFIGS timed at each shape.

    python ch13/autotune_sweep.py [--out DIR]

For each (M, N, K): every configuration of ch13/triton_kernels.GEMM_CONFIGS timed (triton.testing.do_bench, median);
its tiles and waves (tiles / SMs); what its compiled kernel holds (registers per thread, spilled registers, shared
memory per program: Triton's CompiledKernel n_regs, n_spills, metadata.shared), hence the programs one SM holds and
the waves at that occupancy (tiles / (SMs x programs per SM)); the autotuner's pick and its tuning time (the first
autotuned call; on the first shape it compiles the eight kernels too); the pick against the fastest, median and
slowest configuration and the calls it takes to repay the tuning; cuBLAS. At the decode shape (M <= 64), GemLite's
float8 weight-only layer with its own autotuning, where gemlite imports. Writes autotune_sweep.json and
autotune_sweep.md, with a "why" line per shape made from the numbers. GPU and Triton only.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ch13.sweep import cannot_sweep  # noqa: E402

SHAPES = [(8192, 14336, 4096), (8192, 4096, 14336), (64, 14336, 4096), (512, 4096, 4096), (2304, 2304, 8192)]
# An H100's per-SM limits where torch does not report them. The driver reserves 1 KB of shared memory per program
# (block) on sm_80 and later; registers are handed out per warp in units of 256 (8 per thread).
H100 = {"sms": 132, "smem_per_sm": 233472, "smem_per_block": 232448, "regs_per_sm": 65536, "threads_per_sm": 2048,
        "blocks_per_sm": 32, "smem_reserved": 1024}
PROPS = {"sms": "multi_processor_count", "smem_per_sm": "shared_memory_per_multiprocessor",
         "smem_per_block": "shared_memory_per_block_optin", "regs_per_sm": "regs_per_multiprocessor",
         "threads_per_sm": "max_threads_per_multi_processor"}


def programs_per_sm(regs, warps: int, shared_bytes, dev: dict = H100) -> tuple:
    """How many programs (blocks) of a kernel one SM holds at once, and which resource runs out first."""
    if regs is None or shared_bytes is None:
        return None, "unknown"
    limits = {"threads": dev["threads_per_sm"] // (32 * warps), "blocks": dev["blocks_per_sm"],
              "shared memory": dev["smem_per_sm"] // (shared_bytes + dev["smem_reserved"])
              if shared_bytes <= dev["smem_per_block"] else 0}
    if regs > 0:
        limits["registers"] = dev["regs_per_sm"] // (math.ceil(regs * 32 / 256) * 256) // warps
    limiter = min(limits, key=limits.get)
    return limits[limiter], limiter


def payback_calls(tune_s, baseline_ms, pick_ms):
    """Calls at the pick's saving per call (baseline - pick) that add up to the tuning time; None: never."""
    if tune_s is None or baseline_ms is None or pick_ms is None or not baseline_ms - pick_ms > 0:
        return None
    return math.ceil(tune_s * 1e3 / (baseline_ms - pick_ms))


def tuning_gain(configs: list, pick, tune_s) -> dict:
    """The autotuner's pick against the fastest, median and slowest correct configuration at one shape."""
    ms = sorted(c["ms"] for c in configs if c["correct"] is True and math.isfinite(c["ms"]))
    if not ms:
        return {}
    g = {"fastest_ms": ms[0], "median_ms": statistics.median(ms), "slowest_ms": ms[-1],
         "pick_ms": next((c["ms"] for c in configs if pick and tuple(c["config"]) == tuple(pick)), None)}
    for base in ("median", "slowest"):
        g[f"payback_calls_vs_{base}"] = payback_calls(tune_s, g[f"{base}_ms"], g["pick_ms"])
    return g


def label(cfg) -> str:
    return "{}x{}x{}, {} stages, {} warps".format(*cfg)


def why_line(r: dict) -> str:
    """One sentence from a shape's numbers: what won, what it holds per SM, what the autotuner did and what it cost."""
    cs, g, pick = r["configs"], r.get("gain") or {}, r.get("autotuner_pick_config")
    best = next((c for c in cs if r.get("fastest") and tuple(c["config"]) == tuple(r["fastest"])), None)
    if best is None:
        return "no configuration ran correctly"
    fill = (f"{best['waves_resident']:.2f} waves at {best['programs_per_sm']} program(s)/SM (limit: "
            f"{best['limited_by']})" if best.get("waves_resident") else f"{best['waves']:.2f} waves over the SMs")
    line = (f"fastest: {label(best['config'])}, {best['ms']:.3f} ms: {fill}, {best.get('regs')} regs, "
            f"{best.get('spills')} spilled, tiles {best['tile_fill']:.0%} used; ")
    picked = next((c for c in cs if pick and tuple(c["config"]) == tuple(pick)), None)
    if picked is best:
        line += "the autotuner picked it"
    else:
        line += f"the autotuner picked {label(pick) if pick else 'an unknown configuration'}" + (
            f" ({picked['ms'] / best['ms']:.2f}x the fastest's time here)" if picked else "")
    if g.get("pick_ms") is not None and r.get("autotune_s") is not None:
        calls = g["payback_calls_vs_median"]
        line += (f"; tuning {r['autotune_s']:.1f} s, against the median configuration ({g['median_ms']:.3f} ms), "
                 + (f"repays after {calls} calls" if calls else "never repays (the pick is no faster)")
                 + f" ({g['payback_calls_vs_slowest'] or 'never'} against the slowest, {g['slowest_ms']:.3f} ms)")
    return line


def config_tuple(cfg):
    """A triton.Config of gemm_autotuned as (BM, BN, BK, stages, warps); None for anything else."""
    kw = getattr(cfg, "kwargs", {})
    try:
        return (kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], cfg.num_stages, cfg.num_warps)
    except (KeyError, AttributeError):
        return None


def compiled_kernels(fn) -> list:
    """Each kernel Triton compiled for a @triton.jit function (found through autotune/heuristics wrappers): its
    constexprs by name, warps, stages, registers per thread, spilled registers and shared bytes per program."""
    while fn is not None and not hasattr(fn, "device_caches"):
        fn = getattr(fn, "fn", None)
    found = []
    for caches in list(getattr(fn, "device_caches", {}).values()):
        for k in list(caches[0].values()):
            if getattr(k, "n_regs", None) is None:
                try:
                    k._init_handles()  # n_regs and n_spills are read when the binary is loaded
                except Exception:
                    pass
            md, src = getattr(k, "metadata", None), getattr(k, "src", None)
            names = getattr(getattr(src, "fn", None), "arg_names", [])
            found.append({**{names[p[0]]: getattr(v, "value", v) for p, v in getattr(src, "constants", {}).items()
                             if isinstance(p, tuple) and len(p) == 1 and p[0] < len(names)},
                          "num_warps": getattr(md, "num_warps", None), "num_stages": getattr(md, "num_stages", None),
                          "regs": getattr(k, "n_regs", None), "spills": getattr(k, "n_spills", None),
                          "shared_bytes": getattr(md, "shared", None)})
    return found


def resources(kernels: list, want: dict) -> dict:
    """regs, spills and shared_bytes of the first compiled kernel whose constexprs and options match want."""
    k = next((k for k in kernels if all(k.get(n) == v for n, v in want.items())), {})
    return {n: k.get(n) for n in ("regs", "spills", "shared_bytes")}


def gemlite_at(x, w, ref, bench) -> dict:
    """GemLite's float8 weight-only layer computing x @ w (A16W8_FP8, built as
    ch13/optimized_fp8_linear_gemlite_weight_only.py builds it): its first call, which runs GemLite's own
    autotuning, its time a call, and the kernel configuration each of its autotuners chose for this (N, K)."""
    import torch
    try:
        import gemlite
        from gemlite import core, helper
    except Exception as e:
        return {"installed": False, "error": f"{type(e).__name__}: {e}"[:300]}
    try:
        (_, k), n = x.shape, w.shape[1]
        lin = torch.nn.Linear(k, n, bias=False, device=x.device, dtype=x.dtype)
        with torch.no_grad():
            lin.weight.copy_(w.t())
            layer = helper.A16W8_FP8(device=str(x.device), dtype=x.dtype).from_linear(lin)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            y = layer(x)
            torch.cuda.synchronize()
            tune_s = time.perf_counter() - t0
            ms = bench(lambda: layer(x))
        rel = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
        picks = []
        for name, cls in getattr(core, "GEMLITE_TRITON_MAPPING", {}).items():
            kerns = getattr(cls, "kernel", [])
            for kern in kerns if isinstance(kerns, (list, tuple)) else [kerns]:
                for key, cfg in [(key, c) for key, c in getattr(kern, "cache", {}).items() if key[1:3] == (n, k)]:
                    table = getattr(core, "GEMLITE_TRITON_CONFIG_CACHE", {}).get(name, {})
                    picks.append({"matmul_type": name, "key": str(tuple(key[:6])), "config": str(cfg),
                                  "from_bundled_table": str(tuple(key[:6])) in table,
                                  "bench_s": getattr(kern, "bench_time", None), **resources(compiled_kernels(kern), {
                                      **cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages})})
        return {"installed": True, "version": getattr(gemlite, "__version__", None), "tune_s": tune_s, "ms": ms,
                "rel_err": rel, "correct": rel < 0.1, "picks": picks}  # float8 weights: a few % relative error
    except Exception as e:
        return {"installed": True, "error": f"{type(e).__name__}: {e}"[:300]}


def sweep_shape(tk, bench, m, n, k, x, w, ref, dev) -> dict:
    """Tune, then time every configuration at one shape; what each compiled kernel holds; cuBLAS."""
    import torch
    out, flops, at = torch.empty(m, n, device=x.device, dtype=x.dtype), 2.0 * m * n * k, tk.gemm_autotuned
    compiled_before, timings_before = len(compiled_kernels(tk._gemm_kernel)), getattr(at, "configs_timings", None)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    tk.gemm(x, w, None, out, gelu=False)
    torch.cuda.synchronize()
    tune_s = time.perf_counter() - t0
    pick = next((config_tuple(c) for key, c in getattr(at, "cache", {}).items() if tuple(key[:3]) == (m, n, k)), None)
    timings = getattr(at, "configs_timings", None)  # the autotuner's own (ms), if it benchmarked this shape now
    own = {config_tuple(c): (t[0] if isinstance(t, (list, tuple)) else t)
           for c, t in (timings.items() if timings is not timings_before and timings else ())}
    configs = []
    for cfg in tk.GEMM_CONFIGS:
        bm, bn, bk, stages, warps = cfg
        tiles = math.ceil(m / bm) * math.ceil(n / bn)
        try:
            ms = bench(lambda: tk.gemm(x, w, None, out, gelu=False, config=cfg))
            ok = torch.allclose(out.float(), ref.float(), rtol=2e-2, atol=2e-2)
        except Exception as e:  # out of shared memory on a smaller GPU
            ms, ok = float("nan"), f"{type(e).__name__}"
        try:
            res = resources(compiled_kernels(tk._gemm_kernel), {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                                                                "num_stages": stages, "num_warps": warps})
        except Exception as e:  # Triton's internals: reported, not fatal
            res = {"regs": None, "spills": None, "shared_bytes": None, "error": f"{type(e).__name__}: {e}"[:200]}
        per_sm, limiter = programs_per_sm(res["regs"], warps, res["shared_bytes"], dev)
        configs.append({"config": tuple(cfg), "ms": ms, "tflops": flops / ms / 1e9, "tiles": tiles,
                        "waves": tiles / dev["sms"], "tile_fill": m * n / (tiles * bm * bn), **res,
                        "programs_per_sm": per_sm, "limited_by": limiter,
                        "waves_resident": tiles / (dev["sms"] * per_sm) if per_sm else None,
                        "autotuner_ms": own.get(tuple(cfg)), "correct": ok})
    good = [c for c in configs if c["correct"] is True]
    best = min(good, key=lambda c: c["ms"]) if good else None
    r = {"shape": [m, n, k], "autotune_s": tune_s, "autotuner_bench_s": getattr(at, "bench_time", None),
         "kernels_compiled_while_tuning": len(compiled_kernels(tk._gemm_kernel)) - compiled_before,
         "autotuner_pick": tk.picked(m, n, k), "autotuner_pick_config": pick, "fastest": best and best["config"],
         "cublas_ms": bench(lambda: x @ w), "configs": configs, "gain": tuning_gain(configs, pick, tune_s)}
    return {**r, "why": why_line(r)}


def gemlite_line(gl: dict) -> list:
    if not gl.get("installed"):
        return [f"GemLite was not installed ({gl.get('error')}); its rows are absent"]
    if "error" in gl:
        return [f"GemLite failed: {gl['error']}"]
    head = (f"GemLite {gl.get('version')} float8 weight-only: {gl['ms']:.3f} ms a call (relative error "
            f"{gl['rel_err']:.3f}), first call (its autotuning) {gl['tune_s']:.1f} s")
    return [f"{head}; {p['matmul_type']} kernel {p['config']}: {p['regs']} regs, {p['spills']} spilled, "
            f"{p['shared_bytes']} B shared; its autotuner benchmarked {fmt(p['bench_s'], '.1f')} s; from its bundled "
            f"table: {p['from_bundled_table']}" for p in gl["picks"]] or [f"{head}; no chosen kernel found"]


def fmt(v, spec: str) -> str:
    return "" if v is None else format(v, spec)


def markdown(rows: list, name: str, sms: int) -> str:
    lines = [f"# Triton GEMM autotuning per shape ({name}, {sms} SMs)", "",
             "Waves: tiles / SMs. Resident waves: tiles / (SMs x programs per SM), programs per SM from the compiled "
             "kernel's registers and shared memory. Autotuner ms: the autotuner's own measurement.", "",
             "| M, N, K | config (BM, BN, BK, stages, warps) | ms | TFLOP/s | tiles | waves | programs/SM (limit) "
             "| resident waves | regs | spills | shared KB | autotuner ms | correct |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        s, pick = r["shape"], tuple(r["autotuner_pick_config"] or ())
        for c in r["configs"]:
            mark = " **fastest**" if c["config"] == r["fastest"] else ""
            mark += " *picked*" if c["config"] == pick else ""
            kb = None if c["shared_bytes"] is None else c["shared_bytes"] / 1024
            lines.append(f"| {s} | {c['config']}{mark} | {c['ms']:.3f} | {c['tflops']:.0f} | {c['tiles']} | "
                         f"{c['waves']:.2f} | {fmt(c['programs_per_sm'], 'd')} ({c['limited_by']}) | "
                         f"{fmt(c['waves_resident'], '.2f')} | {fmt(c['regs'], 'd')} | {fmt(c['spills'], 'd')} | "
                         f"{fmt(kb, '.0f')} | {fmt(c['autotuner_ms'], '.3f')} | {c['correct']} |")
        flops = 2.0 * s[0] * s[1] * s[2]
        lines.append(f"| {s} | cuBLAS bf16 | {r['cublas_ms']:.3f} | {flops / r['cublas_ms'] / 1e9:.0f} |" + " |" * 9)
        gl = r.get("gemlite") or {}
        if gl.get("ms") is not None:
            lines.append(f"| {s} | GemLite A16W8_FP8 (float8 weights) | {gl['ms']:.3f} | {flops / gl['ms'] / 1e9:.0f} |"
                         + " |" * 8 + f" {gl['correct']} |")
    lines += ["", "## Why, per shape", ""]
    for r in rows:
        lines.append(f"- {r['shape']}: {r['why']}; {r['kernels_compiled_while_tuning']} new kernels while tuning "
                     f"(compiled, or loaded from Triton's disk cache); cuBLAS {r['cublas_ms']:.3f} ms.")
        lines += [f"  - {t}." for t in gemlite_line(r["gemlite"])] if "gemlite" in r else []
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "profiles" / "runs" / "autotune_sweep",
                   help="output folder (default profiles/runs/autotune_sweep)")
    a = p.parse_args(argv)
    refused = cannot_sweep(a.out, "Triton kernels")
    if refused:
        return refused
    import torch
    import triton.testing
    from ch13 import triton_kernels as tk
    props, name = torch.cuda.get_device_properties(0), torch.cuda.get_device_name()
    dev = {**H100, **{key: int(getattr(props, f)) for key, f in PROPS.items() if getattr(props, f, None)}}
    bench = lambda fn: triton.testing.do_bench(fn, return_mode="median")  # noqa: E731

    def inputs(m, n, k):
        g = torch.Generator(device="cuda").manual_seed(m + n + k)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
        w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g) / k**0.5
        return x, w, x @ w
    rows = []
    for m, n, k in SHAPES:
        rows.append(sweep_shape(tk, bench, m, n, k, *inputs(m, n, k), dev))
        print(f"M={m} N={n} K={k}: {rows[-1]['why']}; cuBLAS {rows[-1]['cublas_ms']:.3f} ms", flush=True)
    for r in rows:  # after the sweep, so that an optional library cannot disturb it
        if r["shape"][0] <= 64:
            r["gemlite"] = gemlite_at(*inputs(*r["shape"]), bench)
            print(f"M, N, K = {r['shape']}: " + "; ".join(gemlite_line(r["gemlite"])), flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "autotune_sweep.json").write_text(json.dumps({"device": name, "limits": dev, "sms": dev["sms"],
                                                           "rows": rows}, indent=1, default=str) + "\n")
    (a.out / "autotune_sweep.md").write_text(markdown(rows, name, dev["sms"]))
    print(f"wrote {a.out}/autotune_sweep.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
