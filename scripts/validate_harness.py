#!/usr/bin/env python3
"""Check the harness's timer against independent measurements on this GPU.

    python scripts/validate_harness.py --out profiles/h100-harness [--ncu-csv FILE ...]

1. do_bench: the harness's median vs triton.testing.do_bench (median mode) on the
   same call, for a memory-bound add of >= 100 µs and an 8192^3 bf16 GEMM (target: within 3%).
2. Launch-bound: the harness's per-call time for tiny ops vs 1000 calls timed by hand
   between two device syncs (target: within 10%).
3. Peaks: --peaks' copy bandwidth and bf16 matmul rate vs the same operations timed by
   hand in this process (target: at least 90%).
4. Repeatability: three back-to-back `benchmark.py --pair` runs (target: medians within 2%).
5. ncu (optional): gpu__time_duration from CSV files made by scripts/ncu_targets.sh,
   side by side with the harness.

Writes harness_validation.json and harness_validation.md into --out.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from common.peaks import measure_peaks  # noqa: E402
from common.files import atomic_write, atomic_write_json  # noqa: E402
from common.timing import time_call  # noqa: E402

DEV = torch.device("cuda")


def targets():
    """The calls every check uses: name -> (fn, flush_l2)."""
    g = torch.Generator(device=DEV).manual_seed(0)
    n = 64 << 20  # 3 x 256 MiB moved per add: ~0.27 ms at 3 TB/s
    a, b, c = (torch.randn(n, device=DEV, generator=g) for _ in range(3))
    x = torch.randn(8192, 8192, device=DEV, generator=g).bfloat16()
    y = torch.randn(8192, 8192, device=DEV, generator=g).bfloat16()
    tiny = torch.randn(1, device=DEV, generator=g)
    p = torch.randn(40, 128, 128, device=DEV, generator=g)
    return {
        "add_64M_fp32 (memory-bound)": (lambda: torch.add(a, b, out=c), True),
        "matmul_8192_bf16 (compute-bound)": (lambda: torch.mm(x, y), False),
        "add_1_element (launch-bound)": (lambda: tiny.add_(1.0), False),
        "bmm_40x128 (launch-bound)": (lambda: torch.bmm(p, p), False),
    }


def by_hand_batch(fn, calls=1000) -> float:
    """Milliseconds per call over `calls` back-to-back calls between two device syncs."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / calls


def check_do_bench(ts, rounds: int = 2) -> list[dict]:
    """Alternate harness and do_bench on the same call, so both see the same thermal drift."""
    import triton.testing

    from common.timing import gpu_state

    rows = []
    for name in ("add_64M_fp32 (memory-bound)", "matmul_8192_bf16 (compute-bound)"):
        fn, flush = ts[name]
        ours, theirs, states = [], [], []
        for _ in range(rounds):
            t = time_call(fn, DEV, flush_l2=flush, budget_s=2.0,
                          compute_bound="compute" in name)
            ours.append(t.median_ms)
            states.append(t.gpu_state)
            # do_bench's warm-up and repetitions are in ms; it scrubs L2 before every call.
            theirs.append(triton.testing.do_bench(fn, warmup=500, rep=1000, return_mode="median"))
            states.append(gpu_state(DEV))
        o, t_ = statistics.mean(ours), statistics.mean(theirs)
        rows.append({"call": name, "harness_ms": o, "do_bench_ms": t_, "harness_rounds_ms": ours,
                     "do_bench_rounds_ms": theirs, "gpu_state_after_each": states,
                     "diff_pct": 100 * (o - t_) / t_, "target_pct": 3.0, "pass": abs(o - t_) / t_ <= 0.03})
    return rows


def check_launch(ts, rounds: int = 2) -> list[dict]:
    """Alternate the harness and the by-hand batch: host-bound timings drift with the host's state."""
    rows = []
    for name in ("add_1_element (launch-bound)", "bmm_40x128 (launch-bound)"):
        fn, _ = ts[name]
        ours, hand, calls = [], [], 0
        for _ in range(rounds):
            t = time_call(fn, DEV, budget_s=2.0)
            ours.append(t.median_ms)
            calls = t.calls_per_sample
            hand.append(statistics.median(by_hand_batch(fn) for _ in range(5)))
        o, h = statistics.mean(ours), statistics.mean(hand)
        rows.append({"call": name, "harness_ms": o, "calls_per_sample": calls, "by_hand_1000_calls_ms": h,
                     "harness_rounds_ms": ours, "by_hand_rounds_ms": hand,
                     "diff_pct": 100 * (o - h) / h, "target_pct": 10.0, "pass": abs(o - h) / h <= 0.10})
    return rows


def check_peaks() -> dict:
    peaks = measure_peaks(DEV, log=lambda m: print(m, file=sys.stderr))
    # By hand: 3 warm-up calls, then 50 back-to-back calls between one pair of events; median of 3 such runs.
    def by_hand(fn, calls=50, runs=3):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        ms = []
        for _ in range(runs):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(calls):
                fn()
            e.record()
            e.synchronize()
            ms.append(s.elapsed_time(e) / calls)
        return statistics.median(ms)

    src = torch.randint(0, 2**31 - 1, ((1 << 30) // 4,), dtype=torch.int32, device=DEV)
    dst = torch.empty_like(src)
    copy_gbps = 2 * (1 << 30) / (by_hand(lambda: dst.copy_(src)) * 1e-3) / 1e9
    del src, dst
    g = torch.Generator(device=DEV).manual_seed(1)
    a = torch.randn(8192, 8192, device=DEV, generator=g).bfloat16()
    b = torch.randn(8192, 8192, device=DEV, generator=g).bfloat16()
    bf16 = 2 * 8192**3 / (by_hand(lambda: a @ b) * 1e-3) / 1e12
    return {"peaks": peaks,
            "copy": {"peaks_gbps": peaks["copy_gbps"], "by_hand_gbps": copy_gbps,
                     "ratio_pct": 100 * peaks["copy_gbps"] / copy_gbps, "pass": peaks["copy_gbps"] >= 0.9 * copy_gbps},
            "matmul_bf16": {"peaks_tflops": peaks["matmul_tflops"]["bf16"], "by_hand_tflops": bf16,
                            "ratio_pct": 100 * peaks["matmul_tflops"]["bf16"] / bf16,
                            "pass": peaks["matmul_tflops"]["bf16"] >= 0.9 * bf16}}


def check_repeatability(pairs: list[str], runs: int = 3) -> list[dict]:
    rows = []
    for pair in pairs:
        medians: dict[str, list[float]] = {}
        for i in range(runs):
            out = Path("/tmp") / f"repeat-{pair.replace('/', '_')}-{i}"
            subprocess.run([sys.executable, str(ROOT / "benchmark.py"), "--pair", pair, "--output", str(out)],
                           cwd=ROOT, check=False, capture_output=True, timeout=900)
            doc = json.loads((out / "results.json").read_text())
            for p in doc["pairs"]:
                for v in [p["baseline"]] + p["variants"]:
                    medians.setdefault(v["name"], []).append(v["median_ms"])
        for name, ms in medians.items():
            spread = 100 * (max(ms) - min(ms)) / statistics.median(ms)
            rows.append({"pair": pair, "variant": name, "medians_ms": ms, "spread_pct": spread,
                         "target_pct": 2.0, "pass": spread <= 2.0})
    return rows


NCU_CALLS = 5


def parse_ncu(paths: list[Path]) -> list[dict]:
    """Per-call GPU time from `ncu --csv --metrics gpu__time_duration.sum` files named
    ncu_<clock-control>__<target>.csv: the kernels of the NCU_CALLS profiled calls, summed, over NCU_CALLS."""
    rows = []
    units = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}
    for path in paths:
        text = path.read_text()
        start = text.find('"ID"')
        if start < 0:
            continue
        mode, target = path.stem[len("ncu_"):].split("__", 1)
        total_ns, kernels = 0.0, set()
        for row in csv.DictReader(io.StringIO(text[start:])):
            if row.get("Metric Name") == "gpu__time_duration.sum":
                total_ns += float(row["Metric Value"].replace(",", "")) * units.get(row.get("Metric Unit", "ns"), 1)
                kernels.add(row["Kernel Name"][:50])
        rows.append({"target": target, "clock_control": mode, "ncu_ms_per_call": total_ns / NCU_CALLS / 1e6,
                     "kernels": sorted(kernels)})
    return rows


def ncu_targets(only: str) -> None:
    """Run one target NCU_CALLS times between profiler start and stop (ncu --profile-from-start off)."""
    ts = {name.split()[0]: fn for name, (fn, _) in targets().items()}
    fn = ts[only]
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _ in range(NCU_CALLS):
        fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def markdown(doc: dict) -> str:
    L = [f"# Harness validation on {doc['device']}", "", f"torch {doc['torch']}, created {doc['created']}", "",
         "## 1. Harness median vs triton.testing.do_bench (median mode), same call, alternated", "",
         "| call | harness ms (rounds) | do_bench ms (rounds) | difference of means | within 3% | SM MHz after each |",
         "| --- | ---: | ---: | ---: | --- | --- |"]
    for r in doc["do_bench"]:
        clocks = ", ".join(str(s["sm_clock_mhz"]) if s else "–" for s in r["gpu_state_after_each"])
        L.append(f"| {r['call']} | {r['harness_ms']:.4f} ({', '.join(f'{x:.4f}' for x in r['harness_rounds_ms'])}) | "
                 f"{r['do_bench_ms']:.4f} ({', '.join(f'{x:.4f}' for x in r['do_bench_rounds_ms'])}) | "
                 f"{r['diff_pct']:+.2f}% | {'yes' if r['pass'] else 'NO'} | {clocks} |")
    L += ["", "## 2. Launch-bound: per-call median vs 1000 calls timed by hand (two device syncs), alternated", "",
          "| call | harness ms (rounds) | calls per sample | by hand ms (rounds) | difference of means | within 10% |",
          "| --- | ---: | ---: | ---: | ---: | --- |"]
    L += [f"| {r['call']} | {r['harness_ms']:.5f} ({', '.join(f'{x:.5f}' for x in r['harness_rounds_ms'])}) | "
          f"{r['calls_per_sample']} | {r['by_hand_1000_calls_ms']:.5f} ({', '.join(f'{x:.5f}' for x in r['by_hand_rounds_ms'])}) | "
          f"{r['diff_pct']:+.2f}% | {'yes' if r['pass'] else 'NO'} |" for r in doc["launch"]]
    pk = doc["peaks"]
    L += ["", "## 3. --peaks vs the same operations timed by hand in this run", "",
          "| ceiling | --peaks | by hand | ratio | at least 90% |", "| --- | ---: | ---: | ---: | --- |",
          f"| 1 GiB device copy (read + write) | {pk['copy']['peaks_gbps']:.0f} GB/s | {pk['copy']['by_hand_gbps']:.0f} GB/s | "
          f"{pk['copy']['ratio_pct']:.1f}% | {'yes' if pk['copy']['pass'] else 'NO'} |",
          f"| 8192³ bf16 matmul | {pk['matmul_bf16']['peaks_tflops']:.0f} TFLOP/s | {pk['matmul_bf16']['by_hand_tflops']:.0f} TFLOP/s | "
          f"{pk['matmul_bf16']['ratio_pct']:.1f}% | {'yes' if pk['matmul_bf16']['pass'] else 'NO'} |"]
    if doc.get("repeatability"):
        L += ["", "## 4. Three back-to-back `benchmark.py --pair` runs", "",
              "| pair | variant | medians ms | spread | within 2% |", "| --- | --- | --- | ---: | --- |"]
        L += [f"| {r['pair']} | {r['variant']} | {', '.join(f'{m:.4f}' for m in r['medians_ms'])} | "
              f"{r['spread_pct']:.2f}% | {'yes' if r['pass'] else 'NO'} |" for r in doc["repeatability"]]
    if doc.get("ncu"):
        L += ["", "## 5. ncu gpu__time_duration vs the harness (CUDA events, back to back)", "",
              "| call | ncu --clock-control | ncu ms per call | harness ms | ncu vs harness |",
              "| --- | --- | ---: | ---: | ---: |"]
        harness = {r["call"].split()[0]: r["harness_ms"] for r in doc["do_bench"] + doc["launch"]}
        for r in doc["ncu"]:
            h = harness.get(r["target"])
            L.append(f"| {r['target']} | {r['clock_control']} | {r['ncu_ms_per_call']:.5f} | {h:.5f} | "
                     f"{100 * (r['ncu_ms_per_call'] - h) / h:+.1f}% |")
    L.append("")
    return "\n".join(L)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--ncu-csv", type=Path, nargs="*", default=[])
    ap.add_argument("--ncu-target", help="internal: run one target for ncu (add_64M_fp32, matmul_8192_bf16, ...)")
    ap.add_argument("--repeat-pairs", nargs="*", default=["ch1/vectorization", "ch1/tensor_cores"])
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("error: validate_harness.py needs a CUDA GPU", file=sys.stderr)
        return 2
    if a.ncu_target:
        ncu_targets(a.ncu_target)
        return 0
    if a.out is None:
        print("error: --out DIR is required", file=sys.stderr)
        return 2
    ts = targets()
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    doc["do_bench"] = check_do_bench(ts)
    doc["launch"] = check_launch(ts)
    del ts
    torch.cuda.empty_cache()
    doc["peaks"] = check_peaks()
    torch.cuda.empty_cache()
    doc["repeatability"] = check_repeatability(a.repeat_pairs)
    doc["ncu"] = parse_ncu(a.ncu_csv)
    a.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(a.out / "harness_validation.json", doc)
    atomic_write(a.out / "harness_validation.md", [markdown(doc)])
    print(markdown(doc))
    checks = doc["do_bench"] + doc["launch"] + doc["repeatability"] + [doc["peaks"]["copy"], doc["peaks"]["matmul_bf16"]]
    return 0 if all(c["pass"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
