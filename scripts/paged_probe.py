#!/usr/bin/env python3
"""Chapter 16's paged_kv pair taken apart on a GPU, with the harness's timer (each step one CUDA graph).

At the pair's full size (32 requests of log-normal length, the ~1B model), one decode step:

    contiguous, masked        the pair's baseline: every request's 4096-slot slab, read up to the longest
                              request and masked
    contiguous, kernel        the same slabs read by the paged kernel with the identity table, only each
                              request's own keys: what reading only your own tokens is worth, without paging
    paged, kernel S/N         16-token pages read in place, for split counts S and key tiles N
    paged, gather             the pair's pitfall: pages copied to a contiguous tensor every layer

Each row: ms per step (median, 95% interval), KV bytes held, and the largest relative error of its
logits against the baseline's. The pair's variant uses the split and tile this probe finds fastest.

  python scripts/paged_probe.py OUT.md [--budget 1] [--splits 4 8 16] [--tiles 32 64 128]   (GPU only)
"""
import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=pathlib.Path, help="Markdown table (a .json beside it)")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of timing per row")
    ap.add_argument("--splits", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--tiles", type=int, nargs="+", default=[32, 64, 128])
    a = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("error: scripts/paged_probe.py needs a CUDA GPU; none is visible to PyTorch", file=sys.stderr)
        return 2
    from common.timing import time_call
    from ch16 import baseline_paged_kv as base
    from ch16.optimized_paged_kv import paged_prepare
    from ch16.paged import attend_contiguous, varlen_decode_step
    from ch16.decode import capture_graph

    dev = torch.device("cuda")
    w = base.workload(0, dev)
    print(w.note, flush=True)
    rows = []

    def measure(name, fn, kv_bytes):
        out = fn().float()
        err = ((out - ref).norm() / ref.norm()).item() if ref is not None else 0.0
        t = time_call(fn, dev, flush_l2=True, budget_s=a.budget)
        lo, hi = t.median_ms * (1 - t.median_ci_pct / 200), t.median_ms * (1 + t.median_ci_pct / 200)
        rows.append({"variant": name, "ms": t.median_ms, "ci_ms": [lo, hi], "kv_mib": kv_bytes / 2**20,
                     "rel_err": err, "finite": bool(torch.isfinite(out).all())})
        print(f"{name:28s} {t.median_ms:8.3f} ms ({lo:.3f}-{hi:.3f})  KV {kv_bytes / 2**20:8.1f} MiB  "
              f"rel. err {err:.2e}", flush=True)
        return out

    ref = None
    fn = base.prepare(w)
    ref = measure("contiguous, masked (baseline)", fn, fn.kv.nbytes)
    kv, token, pos = fn.kv, w.inputs["token"], w.inputs["lengths"]
    model = w.inputs["model"]
    for splits in a.splits:
        def step(splits=splits, kv=kv):
            return varlen_decode_step(model, token, pos, kv.write, lambda i, q, p: attend_contiguous(
                q, kv.k[i], kv.v[i], p + 1, base.PAGE, splits, 64))
        measure(f"contiguous, kernel {splits}/64", capture_graph(step), kv.nbytes)
    del fn, kv
    torch.cuda.empty_cache()
    for splits in a.splits:
        for tile in a.tiles:
            fn = paged_prepare(w, "attend_triton", splits=splits, block_n=tile)
            measure(f"paged, kernel {splits}/{tile}", fn, fn.kv.nbytes)
            del fn
            torch.cuda.empty_cache()
    fn = paged_prepare(w, "attend_gather")
    measure("paged, gather (pitfall)", fn, fn.kv.nbytes)

    lines = [f"# paged_kv probe on {torch.cuda.get_device_name()}", "", w.note, "",
             "| variant | ms/step | 95% interval | KV MiB | rel. error vs baseline |", "| --- | ---: | --- | ---: | ---: |"]
    lines += [f"| {r['variant']} | {r['ms']:.3f} | {r['ci_ms'][0]:.3f}-{r['ci_ms'][1]:.3f} | {r['kv_mib']:.1f} | "
              f"{r['rel_err']:.2e} |" for r in rows]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("\n".join(lines) + "\n")
    a.out.with_suffix(".json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                                      "note": w.note, "rows": rows}, indent=1))
    return 0 if all(r["finite"] and r["rel_err"] < 2e-2 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
