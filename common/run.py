"""Run one pair in this process: verify every variant against the baseline, then time them.

Called by the launcher as `python -m common.run ...` (or through torchrun for
pairs with NPROC > 1), one process per pair, so a crash stays inside it.
Steps, in order, for a pair on one device:

1. Build the workload from two seeds; refuse constant inputs.
2. Baseline on both seeds; its output must change with the seed.
3. Each variant on both seeds: compare with the baseline (common.verify);
   its output must change with the seed too. A failing variant is not timed.
4. Time the baseline and each verified variant (common.timing) on seed A.
5. Rates (TFLOP/s, GB/s) and the share of the measured ceiling.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import traceback
from pathlib import Path

import torch

from common import nvtx
from common.discover import load_pair
from common.pair import Pair, Variant, Workload
from common.peaks import ceiling_for
from common.timing import time_call
from common.verify import (DTYPE_PRECISION, PRECISION_DTYPE, check_inputs_random, looser, responds_to_inputs,
                           snapshot, verify_outputs)

SEEDS = (1234, 98765)


def log(msg: str) -> None:
    if int(os.environ.get("RANK", "0")) == 0:
        print(msg, file=sys.stderr, flush=True)


def _agree_fn():
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return lambda x: x
    dev = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")

    def agree(x: float) -> float:
        t = torch.tensor([float(x)], dtype=torch.float64, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())
    return agree


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def rates(w: Workload, median_ms: float, bound: str, precision: str, peaks: dict | None) -> dict:
    """Achieved rates and the share of the ceiling for the pair's bound."""
    s = median_ms * 1e-3
    out = {"tflops": w.flops / s / 1e12 if w.flops else None,
           "gbps": w.bytes_moved / s / 1e9 if w.bytes_moved else None,
           "items_per_s": w.items / s if w.items else None,
           "arithmetic_intensity": w.flops / w.bytes_moved if w.flops and w.bytes_moved else None,
           "pct_of_ceiling": None, "ceiling": None}
    if not peaks:
        return out
    ceiling = ceiling_for(bound, precision, peaks)
    if ceiling is None:  # launch-bound: how far from the roofline floor for this much work
        floors = [w.flops / (peaks["matmul_tflops"].get(precision, peaks["matmul_tflops"]["fp32"]) * 1e12)] if w.flops else []
        if w.bytes_moved:
            floors.append(w.bytes_moved / (peaks["copy_gbps"] * 1e9))
        if floors:
            out["ceiling"] = "roofline_floor_ms"
            out["pct_of_ceiling"] = 100 * max(floors) / s
        return out
    name, value = ceiling
    achieved = out["gbps"] if bound in ("memory", "transfer") else out["tflops"]
    if achieved is not None:
        out["ceiling"] = name
        out["pct_of_ceiling"] = 100 * achieved / value
    return out


def _variant_precision(v: Variant, w: Workload, ref) -> str:
    base = w.precision or DTYPE_PRECISION.get(ref[0].dtype, "fp32")
    return looser(base, v.precision) if v.precision else base


def _profile(fn, label: str, mode: str | None, outdir: Path | None, calls: int = 5) -> str | None:
    """Run a few calls again under the requested profiler, with an NVTX range around them."""
    if not mode:
        return None
    Path(outdir).mkdir(parents=True, exist_ok=True)
    if mode == "torch":
        from torch.profiler import ProfilerActivity, profile, record_function
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        with profile(activities=acts) as prof:
            for _ in range(calls):
                with record_function(label), nvtx.range(label):
                    fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        path = Path(outdir) / f"{label.replace('/', '__')}.trace.json"
        prof.export_chrome_trace(str(path))
        return str(path)
    # nsys / ncu wrap this process and capture between profiler start and stop.
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    with nvtx.range(label):
        for _ in range(calls):
            fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return None


def stage_times(pair: Pair, w: Workload, device: torch.device, agree) -> dict | None:
    """Per-chunk time of each stage run alone, and the serial and ideal pipelined times they imply.

    serial = chunks x sum(stages); ideal = (chunks - 1) x max(stage) + sum(stages): the longest
    stage sets the pace once the pipeline is full, plus one chunk to fill and drain it.
    """
    stages = getattr(pair.baseline.module, "stages", None)
    if stages is None:
        return None
    chunks, fns = stages(w)
    ms = {name: time_call(fn, device, budget_s=0.5, agree=agree).median_ms for name, fn in fns.items()}
    total = sum(ms.values())
    return {"chunks": chunks, "stage_ms": ms, "serial_ms": chunks * total,
            "ideal_ms": (chunks - 1) * max(ms.values()) + total}


def overlap_pct(median_ms: float, st: dict) -> float | None:
    """Where a variant lands between serial (0%) and ideal (100%) pipelining."""
    gap = st["serial_ms"] - st["ideal_ms"]
    return 100.0 * (st["serial_ms"] - median_ms) / gap if gap > 0 else None


def run_pair(pair: Pair, device: torch.device, quick: bool = False, budget_s: float = 2.0,
             peaks: dict | None = None, profile: str | None = None, outdir: Path | None = None) -> dict:
    device = torch.device(device)
    result = {"chapter": pair.chapter, "name": pair.name, "bound": pair.bound, "status": "ok", "error": None,
              "device_type": device.type, "baseline": None, "variants": []}
    if device.type not in pair.devices:
        result.update(status="skipped", error=f"needs {' or '.join(pair.devices).upper()}; this run is on {device.type.upper()}")
        return result
    agree = _agree_fn()
    flush = pair.bound == "memory"
    compute_bound = pair.bound == "compute" and not quick  # a quick run skips the long warm-up

    # 1-2. workload and baseline on two seeds
    wa, wb = (pair.workload(seed=s, device=device, quick=quick) for s in SEEDS)
    for w in (wa, wb):
        complaint = check_inputs_random(w.inputs)
        if complaint:
            raise ValueError(f"{pair.key}: {complaint}")
    result["workload"] = {"flops": wa.flops, "bytes_moved": wa.bytes_moved, "items": wa.items,
                          "item_name": wa.item_name, "launches": wa.launches, "note": wa.note}
    log(f"  verifying baseline on seeds {SEEDS}")
    base_a = pair.baseline.prepare(wa)
    ref_a = snapshot(base_a())
    ref_b = snapshot(pair.baseline.prepare(wb)())
    if not responds_to_inputs(ref_a, ref_b):
        raise ValueError(f"{pair.key}: the baseline's output is identical for two seeds; it ignores its inputs")
    base_prec = wa.precision or DTYPE_PRECISION.get(ref_a[0].dtype, "fp32")

    # 3. verification of each variant
    verdicts = {}
    for v in pair.variants:
        if device.type not in v.devices:
            verdicts[v.name] = None
            continue
        log(f"  verifying {v.name}")
        prec = _variant_precision(v, wa, ref_a)
        allowed = (PRECISION_DTYPE[v.precision],) if v.precision else ()
        try:
            out_a = snapshot(v.prepare(wa)())
            out_b = snapshot(v.prepare(wb)())
            va = verify_outputs(ref_a, out_a, prec, allowed)
            vb = verify_outputs(ref_b, out_b, prec, allowed)
            verdict = va if not va.ok else vb
            if verdict.ok:
                verdict.rel_err, verdict.max_err = max(va.rel_err, vb.rel_err), max(va.max_err, vb.max_err)
                if not responds_to_inputs(out_a, out_b):
                    verdict.ok, verdict.message = False, "output is identical for two seeds; it ignores its inputs"
            verdicts[v.name] = verdict
        except Exception as e:  # a crashing variant fails alone
            verdicts[v.name] = e
            log(f"  {v.name} crashed: {type(e).__name__}: {e}")
        _free(device)
    del wb, ref_b
    _free(device)

    # 4-5. timing
    stages = stage_times(pair, wa, device, agree)
    if stages:
        result["stages"] = stages
        log(f"  stages per chunk (ms): {', '.join(f'{k} {v:.3f}' for k, v in stages['stage_ms'].items())}; "
            f"serial {stages['serial_ms']:.3f}, ideal {stages['ideal_ms']:.3f}")

    def timed(v: Variant, fn, prec: str) -> dict:
        log(f"  timing {v.name} ...")
        t = time_call(fn, device, flush_l2=flush, budget_s=budget_s, agree=agree, compute_bound=compute_bound)
        label = f"{pair.key}/{v.name}"
        # Overlap pairs always get a timeline next to the report: a trace and its Gantt chart.
        mode = profile or ("torch" if stages and outdir and device.type == "cuda" else None)
        trace = _profile(fn, label, mode, outdir, calls=2 if stages else 5)
        entry = {"name": v.name, "file": str(v.path.name), "precision": prec, **t.as_dict(),
                 **rates(wa, t.median_ms, pair.bound, prec, peaks)}
        if stages:
            entry["overlap_pct_of_ideal"] = overlap_pct(t.median_ms, stages)
        if trace:
            entry["trace"] = Path(trace).name
            if stages:
                from common.timeline import draw_gantt
                png = Path(trace).with_name(Path(trace).name.replace(".trace.json", ".timeline.png"))
                if draw_gantt(Path(trace), png, f"{label}: {t.median_ms:.3f} ms per call (2 calls shown)"):
                    entry["timeline"] = png.name
        log(f"  {v.name:40s} {t.median_ms:10.4f} ms  (p10 {t.p10_ms:.4f}, p90 {t.p90_ms:.4f}, n={t.samples}"
            f"x{t.calls_per_sample}, {t.timer}{', ESCAPED STREAM' if t.wall_check and t.wall_check['escaped'] else ''})")
        return entry

    base_entry = timed(pair.baseline, base_a, base_prec)
    base_entry.update(speedup=1.0, verified=True, verification={"ok": True, "message": "reference"})
    result["baseline"] = base_entry
    del base_a
    _free(device)

    def fail(reason: str) -> None:  # the pair fails; its error names the first reason
        result["status"] = "failed"
        result["error"] = result["error"] or reason

    for v in pair.variants:
        verdict = verdicts[v.name]
        entry = {"name": v.name, "file": str(v.path.name), "summary": v.summary, "median_ms": None,
                 "speedup": None, "verified": False, "pct_of_ceiling": None, "error": None}
        if verdict is None:
            entry.update(skipped=f"needs {' or '.join(v.devices).upper()}")
        elif isinstance(verdict, Exception):
            entry.update(error=f"{type(verdict).__name__}: {verdict}")
            fail(f"{v.name} crashed: {entry['error']}")
        elif not verdict.ok:
            entry.update(verification=verdict.as_dict())
            fail(f"{v.name} failed verification: {verdict.message}")
            log(f"  {v.name}: FAILED verification: {verdict.message}")
        else:
            try:
                fn = v.prepare(wa)
                entry.update(timed(v, fn, _variant_precision(v, wa, ref_a)))
                entry.update(verified=True, verification=verdict.as_dict(),
                             speedup=base_entry["median_ms"] / entry["median_ms"])
                del fn
            except Exception as e:
                entry.update(error=f"{type(e).__name__}: {e}")
                fail(f"{v.name} crashed while timed: {entry['error']}")
        _free(device)
        result["variants"].append(entry)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="internal: run one pair (used by benchmark.py)")
    ap.add_argument("--chapter", type=int, required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--optimized", nargs="+", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--peaks")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--profile")
    ap.add_argument("--outdir")
    a = ap.parse_args(argv)

    device = torch.device(a.device)
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        import torch.distributed as dist
        if device.type == "cuda":
            if int(os.environ["LOCAL_WORLD_SIZE"]) > torch.cuda.device_count():
                raise RuntimeError(f"{a.chapter}/{a.name} needs {os.environ['LOCAL_WORLD_SIZE']} GPUs; "
                                   f"{torch.cuda.device_count()} visible")
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    pair = load_pair(a.chapter, a.name, Path(a.baseline), [Path(p) for p in a.optimized])
    peaks = json.loads(Path(a.peaks).read_text()) if a.peaks else None
    result = run_pair(pair, device, a.quick, a.budget, peaks, a.profile, a.outdir)
    if int(os.environ.get("RANK", "0")) == 0:
        from common.report import atomic_write_json
        atomic_write_json(Path(a.result), result)
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        import torch.distributed as dist
        dist.destroy_process_group()
    return 0 if result["status"] != "failed" else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except torch.cuda.OutOfMemoryError as e:
        print(f"out of memory: {str(e).splitlines()[0]}", file=sys.stderr)
        sys.exit(3)
    except Exception:
        traceback.print_exc()
        sys.exit(1)
