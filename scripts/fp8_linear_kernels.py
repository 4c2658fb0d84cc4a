#!/usr/bin/env python3
"""The CUDA kernels one call of each ch13 float8 variant runs (fp8_linear or fp8_gemm): name, count, GPU time.

torch.profiler over 10 calls after 10 warm-up calls, at the pair's full size (fp8_linear: 64 tokens,
4096 -> 14336 -> 4096; fp8_gemm: 8192 tokens, 8192 -> 8192; bf16). What it is for: the slow float8 paths explained by their kernels (a dequantize pass, quantize
kernels around each GEMM, or a host that cannot keep up: a per-call span far above the kernels' sum).
Variants whose package is missing (torchao, gemlite) print why and are skipped.

  python scripts/fp8_linear_kernels.py OUT.json [--pair fp8_gemm]      (GPU only)
"""
import argparse
import importlib
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

VARIANTS = {"fp8_linear": ["baseline_fp8_linear", "optimized_fp8_linear_triton", "optimized_fp8_linear_scaled_mm",
                           "optimized_fp8_linear_weight_only", "optimized_fp8_linear_dynamic",
                           "optimized_fp8_linear_gemlite_weight_only", "optimized_fp8_linear_gemlite_dynamic"],
            "fp8_gemm": ["baseline_fp8_gemm", "optimized_fp8_gemm"]}


def kernels_per_call(call, calls: int = 10):
    import torch
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    ev = sorted((e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                key=lambda e: e.time_range.start)
    span = (ev[-1].time_range.end - ev[0].time_range.start) / calls
    by_name = {}
    for e in ev:
        k = by_name.setdefault(e.name[:90], [0, 0.0])
        k[0] += 1
        k[1] += e.time_range.end - e.time_range.start
    rows = sorted(((n, c / calls, t / calls) for n, (c, t) in by_name.items()), key=lambda r: -r[2])
    return span, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=pathlib.Path, help="JSON file: per variant, the span per call (us) and its kernels")
    ap.add_argument("--pair", choices=sorted(VARIANTS), default="fp8_linear", help="which pair (default fp8_linear)")
    a = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 2
    w = importlib.import_module(f"ch13.baseline_{a.pair}").workload(0, "cuda")
    out = {}
    for name in VARIANTS[a.pair]:
        try:
            span, rows = kernels_per_call(importlib.import_module("ch13." + name).prepare(w))
        except ImportError as e:
            print(f"## {name}: skipped ({e})")
            continue
        out[name] = {"span_us": span, "kernels": rows}
        print(f"## {name}: span {span:.1f} us per call, {sum(r[1] for r in rows):.0f} kernels, "
              f"{sum(r[2] for r in rows):.1f} us of them")
        for n, c, t in rows[:8]:
            print(f"   {t:8.1f} us  x{c:.0f}  {n}")
    a.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
