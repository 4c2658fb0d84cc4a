"""Where a tensor-parallel decode step's time goes: its all-reduces' share, NCCL against symmetric memory.

    torchrun --nproc-per-node 2 ch16/tp_decode_breakdown.py              # the pair's GPU size (llama-1b)
    torchrun --nproc-per-node 2 ch16/tp_decode_breakdown.py --quick      # the small model: a smoke run
    options: --output DIR (default: a new profiles/runs/<YYYYMMDD-HHMMSS>-ch16-tp-breakdown/), --budget S,
             --device cpu (Gloo on CPU processes, also where GPUs are present)

The tp_decode pair (baseline_tp_decode.py) times the whole step. This script takes the pair's own workload
(seed 0) and its own graphed step (`tp_step`) apart, timing five calls:
    step_nccl       the step, every all-reduce dist.all_reduce (NCCL; Gloo on CPUs)
    step_symm       the step, every all-reduce torch.ops.symm_mem.one_shot_all_reduce (GPUs only)
    compute_only    the same sharded step with no all-reduce: each rank's partial sums stay unsummed, so its
                    answer is wrong. It is timed, never verified: the time of the step's own kernels
    allreduce_nccl  the step's 2 x n_layers all-reduces of one (1, 1, dim) message, alone, graphed as the step is
    allreduce_symm  the same with the one-shot all-reduce (its copy into the symmetric buffer included, as in the step)
With --fused (GPUs), the three steps again with each layer's pieces compiled by torch.compile (step_nccl_fused,
step_symm_fused, compute_only_fused; ShardedModel(fused=True)): what the all-reduces cost once the step has
fewer kernels. A fused step that fails its check is reported and not timed.
The two steps are first checked against each other (the same logits within the bf16 tolerance; the pair checks
each against one process). Derived: a step's all-reduce share = (step - compute_only) / step, the same gap per
all-reduce, and the all-reduce alone per call. Timing is the harness's (common.timing.time_call): every rank
takes each decision together (the max over ranks), and a time is the slowest rank's median.

Writes breakdown.json and breakdown.md into the output folder (rank 0, once everything is measured).
NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1
unless already set): no multimem operation is called.
"""
from __future__ import annotations

import gc
import gzip
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from ch16 import baseline_tp_decode as tp  # noqa: E402
from ch16.decode import capture_graph  # noqa: E402
from ch16.symmetric_memory_inference import Transport  # noqa: E402
from common.cli import ArgParser  # noqa: E402
from common.files import atomic_write_json, new_run_folder  # noqa: E402
from common.timing import BUDGET_S, QUICK_BUDGET_S, max_over_ranks, time_call  # noqa: E402
from common.verify import verify_outputs  # noqa: E402

SEED = 0


def allreduces_alone(w, allreduce: str):
    """The step's 2 x n_layers all-reduces of one (1, 1, dim) message, nothing else, graphed on a GPU.
    The message is zeros: an all-reduce moves and adds the same bytes whatever they hold, and zeros
    summed in place stay zeros however often the graph replays."""
    cfg, device = w.inputs["cfg"], w.inputs["token"].device
    transport = Transport(device, symmetric=allreduce == "symm", allreduce=allreduce)
    x = torch.zeros(1, 1, cfg.dim, dtype=w.inputs["k_cache"].dtype, device=device)

    def run():
        for _ in range(2 * cfg.n_layers):
            out = transport.all_reduce(x, dist.group.WORLD)
        return out
    if device.type != "cuda":
        return run
    run()  # the symmetric buffer and its rendezvous (a collective), outside the capture
    replay = capture_graph(run)
    replay.keepalive = transport
    return replay


def kernel_time(fn, calls: int = 5, trace: Path | None = None) -> dict:
    """Per call, from torch.profiler (GPU only): the GPU time of the all-reduce kernels (NCCL's, the one-shot's),
    of copies (memcpy: the one-shot's copy into its buffer among them) and of every other kernel, and the kernel
    count. An all-reduce kernel's time includes its wait for the other rank, and the first calls under a profiler
    wait for the other rank's profiler to start (milliseconds): the all-reduce time is the median kernel's
    times their number. `trace`: also write the Chrome trace there."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    allreduce, copy_us, other_us, kernels = [], 0.0, 0.0, 0
    for e in prof.events():
        if e.device_type != DeviceType.CUDA:
            continue
        name, us = e.name.lower(), e.time_range.elapsed_us()
        kernels += 1
        if "nccl" in name or "all_reduce" in name or "allreduce" in name:
            allreduce.append(us)
        elif name.startswith("memcpy"):
            copy_us += us
        else:
            other_us += us
    if trace is not None:
        prof.export_chrome_trace(str(trace))
    median = statistics.median(allreduce) if allreduce else 0.0
    return {"allreduce_kernels": len(allreduce) / calls, "allreduce_median_us": median,
            "allreduce_us": median * len(allreduce) / calls, "copy_us": copy_us / calls, "other_us": other_us / calls,
            "kernels": kernels / calls}


class StepsDiffer(RuntimeError):
    """A step's answer differs from step_nccl's: raised by every rank at once (they all-reduce the verdict)."""


def fails_on_a_rank(verdict) -> bool:
    """Did the check fail on any rank? Every rank gets the same answer, so all take the same branch."""
    return max_over_ranks(0.0 if verdict.ok else 1.0) == 1.0


def timed(fn, device, budget_s: float) -> dict:
    t = time_call(fn, device, budget_s=budget_s, agree=max_over_ranks)
    return {"ms": max_over_ranks(t.median_ms), "p10_ms": max_over_ranks(t.p10_ms), "p90_ms": max_over_ranks(t.p90_ms),
            "median_ci_pct": max_over_ranks(t.median_ci_pct), "samples": t.samples, "timer": t.timer}


def measure(device, quick: bool, budget_s: float, log, profile: bool = False, traces: Path | None = None,
            fused: bool = False) -> dict:
    w = tp.workload(SEED, device, quick)
    cfg = w.inputs["cfg"]
    calls = {"step_nccl": tp.tp_step(w, "dist")}
    if device.type == "cuda":
        calls["step_symm"] = tp.tp_step(w, "symm")
    calls["compute_only"] = tp.tp_step(w, "none")
    calls["allreduce_nccl"] = allreduces_alone(w, "dist")
    if device.type == "cuda":
        calls["allreduce_symm"] = allreduces_alone(w, "symm")
        if fused:  # the same three steps with each layer's pieces compiled (ShardedModel(fused=True))
            log("  compiling the fused steps")
            for name, allreduce in (("step_nccl_fused", "dist"), ("step_symm_fused", "symm"),
                                    ("compute_only_fused", "none")):
                calls[name] = tp.tp_step(w, allreduce, fused=True)
    precision = "bf16" if w.inputs["k_cache"].dtype == torch.bfloat16 else "fp32"
    reference = calls["step_nccl"]().detach().clone()
    # The check's negative control: the step without all-reduces must fail it (each rank's partial sums only).
    control = verify_outputs([reference], [calls["compute_only"]().detach().clone()], precision)
    control_failed = fails_on_a_rank(control)
    checked = {}  # every step writes the same KV position before it reads it: same inputs, the same answer
    for name in [n for n in calls if n.startswith("step_") and n != "step_nccl"]:
        if name not in calls:  # a fused step dropped with the first fused failure
            continue
        verdict = verify_outputs([reference], [calls[name]().detach().clone()], precision)
        checked[name] = verdict.message
        if not fails_on_a_rank(verdict):
            continue
        if not name.endswith("_fused"):
            raise StepsDiffer(f"{name} differs from step_nccl: {verdict.message}")
        checked[name] = "FAILED, not timed: " + verdict.message   # the fused steps fail alone
        for fused_name in [n for n in calls if n.endswith("_fused")]:
            del calls[fused_name]
    accuracy = {}
    if precision == "bf16":  # how far bf16 is from fp32, sharded or not (the pair checks against one process in bf16)
        one = tp.one_process_step(SEED, device, torch.bfloat16, quick)
        fp32 = tp.one_process_step(SEED, device, torch.bfloat16, quick, compute_dtype=torch.float32)
        pairs = [("step_nccl against one process, bf16", one, reference),
                 ("step_nccl against one process, fp32", fp32, reference),
                 ("one process bf16 against fp32", fp32, one)]
        if "step_nccl_fused" in calls:
            fused = calls["step_nccl_fused"]().detach().clone()
            pairs.append(("step_nccl_fused against one process, fp32", fp32, fused))
        for name, ref, out in pairs:
            accuracy[name] = verify_outputs([ref], [out], precision, allowed_dtypes=(torch.bfloat16,)).message
        del one, fp32
    rows = {}
    for name, fn in calls.items():
        log(f"  timing {name}")
        rows[name] = timed(fn, device, budget_s)
    if profile and device.type == "cuda":  # after timing, so that no profiler runs beside the rounds
        for name, fn in calls.items():  # every rank makes the calls (they hold collectives); rank 0 keeps traces
            log(f"  profiling {name}")
            rows[name]["profile"] = kernel_time(fn, trace=traces / f"{name}.trace.json" if traces else None)
    n_ar = 2 * cfg.n_layers
    for suffix in ("", "_fused"):
        for kind in ("nccl", "symm"):
            if f"step_{kind}{suffix}" not in rows:
                continue
            step = rows[f"step_{kind}{suffix}"]
            step["allreduce_ms"] = step["ms"] - rows[f"compute_only{suffix}"]["ms"]
            step["allreduce_share"] = step["allreduce_ms"] / step["ms"]
            step["per_allreduce_us"] = step["allreduce_ms"] * 1e3 / n_ar
    for kind in ("nccl", "symm"):
        if f"allreduce_{kind}" in rows:
            rows[f"allreduce_{kind}"]["per_allreduce_us"] = rows[f"allreduce_{kind}"]["ms"] * 1e3 / n_ar
    out = {"world_size": dist.get_world_size(), "device": torch.cuda.get_device_name(device) if device.type == "cuda"
           else "cpu", "config": tp.sizes(device, quick)[0], "context": tp.sizes(device, quick)[1],
           "allreduces_per_step": n_ar, "message_bytes": cfg.dim * w.inputs["k_cache"].element_size(),
           "quick": quick, "budget_s": budget_s, "torch": torch.__version__,
           "backend": dist.get_backend() + (" " + ".".join(map(str, torch.cuda.nccl.version()))
                                            if device.type == "cuda" else ""),
           "checked": "; ".join(f"{n} against step_nccl: {m}" for n, m in checked.items()) or "one step (CPU)",
           "control": ("compute_only against step_nccl, which must fail: "
                       + ("failed, " if control_failed else "PASSED, so the check cannot tell: ") + control.message),
           "accuracy": accuracy, "rows": rows}
    if "step_symm" in rows:
        out["speedup_symm_over_nccl"] = rows["step_nccl"]["ms"] / rows["step_symm"]["ms"]
    if "step_symm_fused" in rows:
        out["speedup_symm_over_nccl_fused"] = rows["step_nccl_fused"]["ms"] / rows["step_symm_fused"]["ms"]
    return out


def markdown(r: dict) -> str:
    lines = [f"# Tensor-parallel decode step on {r['world_size']} x {r['device']}: where the time goes", "",
             f"{r['config']}, context {r['context']}, {r['allreduces_per_step']} all-reduces of {r['message_bytes']} "
             f"bytes per step; torch {r['torch']}, {r['backend']}" + (" (--quick: not results)" if r["quick"] else ""),
             "", f"Checked: {r['checked']}.", "", f"Negative control: {r['control']}.", ""]
    if r["accuracy"]:
        lines += [f"- {k}: {v}" for k, v in r["accuracy"].items()] + [""]
    lines += ["| call | ms (slowest rank's median) | p10-p90 | all-reduce share | per all-reduce |",
              "| --- | ---: | --- | ---: | ---: |"]
    for name, row in r["rows"].items():
        share = f"{100 * row['allreduce_share']:.1f}%" if "allreduce_share" in row else ""
        per = f"{row['per_allreduce_us']:.2f} µs" if "per_allreduce_us" in row else ""
        lines.append(f"| {name} | {row['ms']:.4f} | {row['p10_ms']:.4f}-{row['p90_ms']:.4f} | {share} | {per} |")
    profiled = {name: row["profile"] for name, row in r["rows"].items() if "profile" in row}
    if profiled:
        lines += ["", f"Kernels per call on rank 0 (torch.profiler, 5 calls; {r['allreduces_per_step']} all-reduces a "
                  "step). All-reduce µs is the median all-reduce kernel times their number: a kernel's time includes "
                  "its wait for the other rank.", "",
                  "| call | kernels | all-reduce kernels | median all-reduce kernel µs | all-reduce µs | "
                  "copies µs | "
                  "other kernels µs | all kernels µs | not in a kernel µs |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for name, k in profiled.items():
            busy = k["allreduce_us"] + k["copy_us"] + k["other_us"]
            lines.append(f"| {name} | {k['kernels']:.0f} | {k['allreduce_kernels']:.0f} | "
                         f"{k['allreduce_median_us']:.2f} "
                         f"| {k['allreduce_us']:.1f} | {k['copy_us']:.1f} | {k['other_us']:.1f} | {busy:.1f} | "
                         f"{r['rows'][name]['ms'] * 1e3 - busy:.1f} |")
    if "speedup_symm_over_nccl" in r:
        lines += ["", f"step_nccl / step_symm: {r['speedup_symm_over_nccl']:.3f}x"]
    if "speedup_symm_over_nccl_fused" in r:
        lines += ["", f"step_nccl_fused / step_symm_fused: {r['speedup_symm_over_nccl_fused']:.3f}x"]
    lines += ["", "compute_only leaves out every all-reduce (its answer is wrong): the step's own kernels. A step's "
              "all-reduce share is (step - compute_only) / step; per all-reduce, that gap over the "
              f"{r['allreduces_per_step']} all-reduces. The allreduce_* rows are the same all-reduces alone."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = ArgParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the small model: checks that the script runs (not results)")
    ap.add_argument("--budget", type=float, metavar="S",
                    help=f"timing budget per call in seconds (default {BUDGET_S:g}, --quick {QUICK_BUDGET_S:g})")
    ap.add_argument("--output", type=Path, metavar="DIR", help="folder for breakdown.json and breakdown.md")
    ap.add_argument("--device", choices=("cuda", "cpu"), help="cuda (one GPU a process, NCCL) or cpu (Gloo); "
                    "default cuda where a GPU is visible")
    ap.add_argument("--fused", action="store_true", help="GPU: also the steps with each layer's pieces compiled "
                    "by torch.compile (what the all-reduce costs once the step has fewer kernels)")
    ap.add_argument("--profile", action="store_true", help="GPU: also each call's kernels by class (torch.profiler), "
                    "after timing, and their traces (rank 0's) beside the report")
    a = ap.parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world < 2:
        print("error: a tensor-parallel step needs 2 or more processes: "
              "torchrun --nproc-per-node 2 ch16/tp_decode_breakdown.py", file=sys.stderr)
        return 2
    kind = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda" and torch.cuda.device_count() < world:
        print(f"error: {world} processes need {world} GPUs; {torch.cuda.device_count()} visible (--device cpu: Gloo)",
              file=sys.stderr)
        return 2
    rank = int(os.environ["RANK"])
    if kind == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    for k, v in MULTICAST_OFF.items():
        os.environ.setdefault(k, v)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if rank == 0 else (lambda m: None)
    traces = Path(tempfile.mkdtemp()) if a.profile and rank == 0 else None
    report, error, everywhere = None, None, False
    try:
        report = measure(device, a.quick, a.budget or (QUICK_BUDGET_S if a.quick else BUDGET_S), log, a.profile,
                         traces, a.fused)
    except Exception as e:  # noqa: BLE001 - one line, no report
        error, everywhere = f"{type(e).__name__}: {e}", isinstance(e, StepsDiffer)
        # An error every rank raised is rank 0's to print, and the others exit 0 below: one that exited 1 first
        # would have torchrun stop rank 0 before it printed. A rank's own error, that rank prints, now: the other
        # ranks may be waiting in a collective, and then the teardown below may never return.
        if rank == 0 or not everywhere:
            print(f"error: {error}" if rank == 0 else f"error: rank {rank}: {error}", file=sys.stderr, flush=True)
    gc.collect()  # first free the CUDA graphs that captured NCCL calls: destroying the group under them hangs
    dist.destroy_process_group()
    if error:
        if traces:
            shutil.rmtree(traces, ignore_errors=True)
        return 0 if everywhere and rank != 0 else 1
    if rank == 0:
        folder = a.output or new_run_folder("ch16-tp-breakdown")
        folder.mkdir(parents=True, exist_ok=True)
        for trace in sorted(traces.glob("*.json")) if traces else []:  # gzipped: Perfetto opens them as they are
            with open(trace, "rb") as f, gzip.open(folder / (trace.name + ".gz"), "wb") as g:
                shutil.copyfileobj(f, g)
        if traces:
            shutil.rmtree(traces, ignore_errors=True)
        atomic_write_json(folder / "breakdown.json", report)
        text = markdown(report)
        (folder / "breakdown.md").write_text(text)
        print(text)
        print(f"wrote {folder / 'breakdown.json'}, {folder / 'breakdown.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
