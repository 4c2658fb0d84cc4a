"""The chapter's method as a script: profile one realistic step from the coarse timeline down to the kernel.

    python ch13/profile_walkthrough.py                        # a transformer block's forward+backward
    python ch13/profile_walkthrough.py --step decode          # chapter 16's model, one decode step
    python ch13/profile_walkthrough.py --compile default      # the same step under torch.compile
    python ch13/profile_walkthrough.py --device cpu --size tiny --output /tmp/w   # what CI runs

The step is a bf16 transformer block (ch13/block.py, d=2048, batch 4 x 2048 tokens) trained forward
and backward, or chapter 16's llama-1b decode step: that is --size full, the default on a GPU. On a CPU the
default is --size tiny, an fp32 block at d=64 (batch 2 x 32 tokens) or chapter 16's small model: it checks
that the steps run, its figures are not results. Four steps, each writing under the output folder
(default: a new profiles/runs/<YYYYMMDD-HHMMSS>-walkthrough-<device>/ per run, -2, -3, ... when two
start in the same second):

1. torch.profiler: the top operators by GPU (on a CPU: CPU) time -> top_ops.txt; the share of the step
   the GPU sits idle, kernels per step and their mean duration, the host time spent allocating ->
   step_metrics.json; the trace -> trace.json (open it at https://ui.perfetto.dev).
2. Memory: on a GPU, torch.cuda.memory._record_memory_history over one step -> memory_snapshot.pickle
   (drag it onto https://pytorch.org/memory_viz) and memory_timeline.png. A CPU has no such history:
   the picture is drawn from the profiler's CPU allocation events instead, and says so.
3. Nsight Compute on the step's kernels, where ncu is installed and the device is a GPU: speed-of-light SM
   and memory throughput, achieved occupancy, registers per thread, global-load sectors per request,
   L2 hit rate -> ncu.csv, and the verdict of common/verdict.py for the kernels that take the most time.
4. Nsight Systems' kernel summary (cuda_gpu_kern_sum) where nsys is installed -> nsys_kernels.csv.
   It is not installed on the GPU machine this repository is measured on: the step says so and goes on.

walkthrough.md gathers the four steps and the verdicts.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from common import verdict as V  # noqa: E402
from common.files import new_run_folder  # noqa: E402
from common.profiling.capture import union_us  # noqa: E402
from ch13.sweep import error  # noqa: E402

# The ncu metrics step 3 collects; the names are Nsight Compute's, the keys common/verdict.py's.
NCU_METRICS = {
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "ld_sectors",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "ld_requests",
    "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
    "gpu__time_duration.sum": "duration_ns",
}
ALLOC_OPS = ("aten::empty", "aten::empty_strided", "aten::empty_like", "aten::zeros", "aten::zeros_like",
             "aten::ones", "aten::new_empty", "aten::new_empty_strided", "aten::new_zeros",
             "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaMallocAsync", "cudaFreeAsync")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the step
def make_step(kind: str, size: str, device: torch.device, compile_mode: str):
    """Returns (step callable, description)."""
    if kind == "block":
        from ch13.block import SIZES, build_blocks, random_input, step_dtype, train_step
        cfg = SIZES["h100" if size == "full" else "tiny"]
        dtype = step_dtype(device)
        model = build_blocks(cfg, device, dtype)
        x = random_input(cfg, device, dtype, seed=1)
        fn = (lambda m, x: train_step(m, x))
        if compile_mode != "none":
            fn = torch.compile(fn, mode=None if compile_mode == "default" else compile_mode)
        desc = (f"transformer block forward+backward, d={cfg.dim}, {cfg.heads} heads, MLP {cfg.mlp}, "
                f"batch {cfg.batch} x {cfg.seq} tokens, {str(dtype).replace('torch.', '')}, compile={compile_mode}")
        return (lambda: fn(model, x)), desc
    if kind == "decode":
        from ch16.model import KVCache, build_model, decode_step, prefill, random_tokens
        name = "llama-1b" if size == "full" else "small"
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        model = build_model(name, seed=0, device=device, dtype=dtype)
        ctx = 1024 if size == "full" else 32
        cache = KVCache.empty(model.cfg, 1, ctx + 64, device=device, dtype=dtype)
        prompt = random_tokens(model.cfg, (1, ctx), seed=1, device=device)
        with torch.no_grad():
            prefill(model, prompt, cache)
        tok, pos = prompt[:, -1:], torch.tensor([ctx], device=device)
        fn = decode_step
        if compile_mode != "none":
            fn = torch.compile(decode_step, mode=None if compile_mode == "default" else compile_mode)

        def step():
            with torch.no_grad():
                return fn(model, cache, tok, pos)
        return step, f"chapter 16 decode step, {name}, batch 1, context {ctx}, compile={compile_mode}"
    raise ValueError(kind)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


# ---------------------------------------------------------------- step 1
def step_metrics(events, steps: int, on_gpu: bool) -> dict:
    """Idle share, kernel count and allocation share from a profile of `steps` steps (each a "walkthrough_step" range)."""
    from torch.autograd import DeviceType
    ranges = [e for e in events if e.name == "walkthrough_step" and e.device_type == DeviceType.CPU]
    m: dict = {"steps": steps}
    cpu_ops = [e for e in events if e.device_type == DeviceType.CPU and e.name != "walkthrough_step"]
    self_total = sum(e.self_cpu_time_total for e in cpu_ops)
    alloc = sum(e.self_cpu_time_total for e in cpu_ops if e.name in ALLOC_OPS)
    m["alloc_cpu_pct"] = 100.0 * alloc / self_total if self_total else 0.0
    if ranges:
        m["cpu_step_ms"] = sum(r.time_range.end - r.time_range.start for r in ranges) / len(ranges) / 1000.0
    if not on_gpu:
        m["note"] = "a CPU run: no GPU idle share and no kernel count (they need CUDA activity)"
        return m
    # GPU activity, less copies and the profiler's own ranges: record_function("walkthrough_step") also appears
    # on the GPU timeline as a user annotation spanning the whole step, which is not a kernel
    kernels = [e for e in events if e.device_type == DeviceType.CUDA and e.name != "walkthrough_step"
               and not getattr(e, "is_user_annotation", False)
               and not e.name.startswith(("Memcpy", "Memset", "[memory]"))]
    if not kernels or not ranges:
        return m
    start = min(r.time_range.start for r in ranges)
    end = max(max(k.time_range.end for k in kernels), max(r.time_range.end for r in ranges))
    busy = union_us([(k.time_range.start, k.time_range.end) for k in kernels])
    m.update(kernels_per_step=len(kernels) / steps,
             mean_kernel_us=sum(k.time_range.end - k.time_range.start for k in kernels) / len(kernels),
             gpu_busy_ms_per_step=busy / steps / 1000.0, wall_ms_per_step=(end - start) / steps / 1000.0,
             gpu_idle_pct=100.0 * max(0.0, 1.0 - busy / (end - start)))
    return m


def profile_step(step, device, out: Path, steps: int = 3):
    from torch.profiler import ProfilerActivity, profile, record_function
    on_gpu = device.type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=acts, profile_memory=not on_gpu, record_shapes=False) as prof:
        for _ in range(steps):
            with record_function("walkthrough_step"):
                step()
            sync(device)
    prof.export_chrome_trace(str(out / "trace.json"))
    sort = "cuda_time_total" if on_gpu else "cpu_time_total"
    table = prof.key_averages().table(sort_by=sort, row_limit=15, max_name_column_width=60)
    (out / "top_ops.txt").write_text(table + "\n")
    metrics = step_metrics(prof.events(), steps, on_gpu)
    mem_events = None
    if not on_gpu:  # the CPU allocation events, in order, for step 2's picture
        mem_events = sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events()
                            if e.self_cpu_memory_usage)  # each op's own allocations minus frees, at its start
    (out / "step_metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    return table, metrics, mem_events


# ---------------------------------------------------------------- step 2
def memory_curve(deltas: list[tuple[float, int]]) -> tuple[list[float], list[float]]:
    """(time, bytes allocated) from (time, +size or -size) events in order; time from the first event, in ms."""
    if not deltas:
        return [], []
    t0, level, ts, mb = deltas[0][0], 0, [], []
    for t, d in deltas:
        level += d
        ts.append((t - t0) / 1000.0)
        mb.append(level / 2**20)
    return ts, mb


def snapshot_deltas(snapshot: dict, device_index: int = 0) -> list[tuple[float, int]]:
    """A memory-history snapshot's trace as (time or order, +size/-size): alloc adds, free_completed removes."""
    traces = snapshot.get("device_traces", [])
    trace = traces[device_index] if device_index < len(traces) else []
    out = []
    for i, e in enumerate(trace):
        t = float(e.get("time_us", i))
        if e["action"] == "alloc":
            out.append((t, int(e["size"])))
        elif e["action"] == "free_completed":
            out.append((t, -int(e["size"])))
    return out


def draw_memory(ts, mb, path: Path, title: str, xlabel: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.step(ts, mb, where="post", lw=1.2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("allocated since start (MiB)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def memory_step(step, device, out: Path, cpu_events) -> dict:
    if device.type == "cuda":
        torch.cuda.memory._record_memory_history(max_entries=200_000)
        torch.cuda.reset_peak_memory_stats()
        step()
        sync(device)
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        with open(out / "memory_snapshot.pickle", "wb") as f:
            pickle.dump(snap, f)
        deltas = snapshot_deltas(snap, torch.cuda.current_device())
        timed = bool(deltas) and "time_us" in (snap["device_traces"][torch.cuda.current_device()] or [{}])[0]
        ts, mb = memory_curve(deltas)
        peak = torch.cuda.max_memory_allocated() / 2**20
        draw_memory(ts, mb, out / "memory_timeline.png",
                    f"GPU memory over one step (allocations during the step; peak {peak:.0f} MiB incl. weights)",
                    "time (ms)" if timed else "allocation event")
        return {"source": "torch.cuda.memory._record_memory_history", "peak_allocated_mib": peak,
                "events": len(deltas), "snapshot": "memory_snapshot.pickle", "picture": "memory_timeline.png"}
    ts, mb = memory_curve(cpu_events or [])
    if not ts:
        return {"source": "none", "note": "no allocation events recorded"}
    draw_memory(ts, mb, out / "memory_timeline.png",
                "CPU memory over the profiled steps (torch.profiler's allocation events)", "time (ms)")
    return {"source": "torch.profiler profile_memory (CPU)", "peak_over_start_mib": max(mb),
            "events": len(ts), "picture": "memory_timeline.png",
            "note": "torch.cuda.memory._record_memory_history needs a GPU: drew the CPU allocations instead"}


# ---------------------------------------------------------------- step 3
def ncu_command(out: Path, child_args: list[str], launch_count: int = 400) -> list[str]:
    return ["ncu", "--profile-from-start", "off", "--target-processes", "all", "--launch-count", str(launch_count),
            "--metrics", ",".join(NCU_METRICS), "--force-overwrite", "-o", str(out / "ncu"),
            sys.executable, str(Path(__file__).resolve()), *child_args, "--capture-child"]


def parse_ncu_csv(text: str) -> list[dict]:
    """Rows of `ncu --import R --csv --page raw`: the header row, a units row, then one row per kernel launch."""
    rows = list(csv.reader(io.StringIO(text)))
    rows = [r for r in rows if r and not r[0].startswith("==")]
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    if body and not body[0][0].strip().isdigit():  # the units row: its first cell (ID) is not a number
        body = body[1:]
    out = []
    for r in body:
        rec = dict(zip(header, r))
        k = {"kernel": rec.get("Kernel Name", "?")}
        for metric, key in NCU_METRICS.items():
            try:
                k[key] = float(str(rec.get(metric, "")).replace(",", ""))
            except ValueError:
                pass
        if k.get("ld_requests"):
            k["sectors_per_request"] = k["ld_sectors"] / k["ld_requests"]
        out.append(k)
    return out


def top_kernels(launches: list[dict], n: int = 5) -> list[dict]:
    """Launches grouped by kernel name, duration-weighted means, the n that take the most time."""
    groups: dict[str, list[dict]] = {}
    for k in launches:
        groups.setdefault(k["kernel"], []).append(k)
    out = []
    for name, ks in groups.items():
        total = sum(k.get("duration_ns", 0.0) for k in ks) or 1.0
        agg = {"kernel": name, "launches": len(ks), "total_us": total / 1000.0}
        for key in ("sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct", "registers_per_thread",
                    "sectors_per_request", "l2_hit_rate_pct"):
            vals = [(k[key], k.get("duration_ns", 1.0)) for k in ks if key in k]
            if vals:
                agg[key] = sum(v * w for v, w in vals) / (sum(w for _, w in vals) or 1.0)
        out.append(agg)
    return sorted(out, key=lambda a: -a["total_us"])[:n]


def ncu_step(device, out: Path, child_args: list[str], launches: int = 400) -> dict:
    if shutil.which("ncu") is None:
        log("step 3: ncu not installed, skipping")
        (out / "ncu_command.txt").write_text(" ".join(ncu_command(out, child_args, launches)) + "\n")
        return {"skipped": "ncu not installed (the command it would run: ncu_command.txt)"}
    if device.type != "cuda":
        log("step 3: ncu profiles GPU kernels; this run is on the CPU, skipping")
        return {"skipped": "a CPU run"}
    cmd = ncu_command(out, child_args, launches)
    log("step 3: " + " ".join(cmd[:12]) + " ...")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    (out / "ncu.log").write_text(r.stdout[-20000:] + r.stderr[-20000:])
    rep = out / "ncu.ncu-rep"
    if r.returncode != 0 or not rep.exists():
        return {"skipped": f"ncu exited {r.returncode} (see ncu.log; profiling counters may need admin rights)"}
    csv_text = subprocess.run(["ncu", "--import", str(rep), "--csv", "--page", "raw", "--print-units", "base"], capture_output=True,
                              text=True).stdout
    (out / "ncu.csv").write_text(csv_text)
    tops = top_kernels(parse_ncu_csv(csv_text))
    for t in tops:
        t["verdict"] = [dataclasses_asdict(f) for f in V.verdict(t, device_type=device.type)]
    return {"csv": "ncu.csv", "report": "ncu.ncu-rep", "top_kernels": tops}


def dataclasses_asdict(f):
    import dataclasses
    return dataclasses.asdict(f)


# ---------------------------------------------------------------- step 4
def nsys_step(device, out: Path, child_args: list[str]) -> dict:
    if shutil.which("nsys") is None:
        log("step 4: nsys not installed, skipping (it is not on the GPU machine this chapter is measured on)")
        return {"skipped": "nsys not installed"}
    if device.type != "cuda":
        log("step 4: nsys's kernel summary needs a GPU; this run is on the CPU, skipping")
        return {"skipped": "a CPU run"}
    rep = out / "nsys"
    r = subprocess.run(["nsys", "profile", "-t", "cuda,nvtx", "--capture-range=cudaProfilerApi", "--force-overwrite=true",
                        "-o", str(rep), sys.executable, str(Path(__file__).resolve()), *child_args, "--capture-child"],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return {"skipped": f"nsys exited {r.returncode}: {r.stderr[-300:]}"}
    s = subprocess.run(["nsys", "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", f"{rep}.nsys-rep"],
                       capture_output=True, text=True)
    (out / "nsys_kernels.csv").write_text(s.stdout)
    return {"csv": "nsys_kernels.csv", "report": "nsys.nsys-rep"}


# ---------------------------------------------------------------- report
def write_report(out: Path, desc: str, device, table: str, metrics: dict, mem: dict, ncu: dict, nsys: dict) -> str:
    findings = V.verdict(metrics, device_type=device.type)  # a CPU step gets no GPU rule (tensor cores, kernels)
    lines = [f"# Profile walkthrough: {desc}", "",
             f"Device: {torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU'}; torch {torch.__version__}; "
             f"{datetime.datetime.now().isoformat(timespec='seconds')}", "",
             "## 1. torch.profiler (trace.json opens in https://ui.perfetto.dev)", "", "```", table.rstrip(), "```", ""]
    lines += [f"- {k}: {v:.3g}" if isinstance(v, float) else f"- {k}: {v}" for k, v in metrics.items()]
    lines += ["", "Step verdict:"] + ([f.line() for f in findings] or ["- nothing by the step-level rules"]) + [""]
    lines += ["## 2. Memory", ""] + [f"- {k}: {v:.4g}" if isinstance(v, float) else f"- {k}: {v}"
                                     for k, v in mem.items()] + [""]
    if mem.get("picture"):
        lines += ["![memory](memory_timeline.png)", ""]
    lines += ["## 3. Nsight Compute", ""]
    if ncu.get("skipped"):
        lines += [f"Skipped: {ncu['skipped']}.", ""]
    for t in ncu.get("top_kernels", []):
        lines.append(f"### `{t['kernel'][:100]}` ({t['launches']} launches, {t['total_us']:.0f} us)")
        lines.append(", ".join(f"{k} {t[k]:.3g}" for k in ("sm_throughput_pct", "memory_throughput_pct",
                     "achieved_occupancy_pct", "registers_per_thread", "sectors_per_request", "l2_hit_rate_pct")
                     if k in t))
        lines += [V.Finding(**f).line() for f in t["verdict"]] or ["- nothing by the kernel-level rules"]
        lines.append("")
    lines += ["## 4. Nsight Systems", "", f"Skipped: {nsys['skipped']}." if nsys.get("skipped")
              else "Kernel summary: nsys_kernels.csv.", ""]
    text = "\n".join(lines)
    (out / "walkthrough.md").write_text(text)
    (out / "walkthrough.json").write_text(json.dumps({"step": desc, "step_metrics": metrics, "memory": mem,
                                                      "ncu": ncu, "nsys": nsys,
                                                      "verdict": [dataclasses_asdict(f) for f in findings]},
                                                     indent=1) + "\n")
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--step", choices=("block", "decode"), default="block",
                   help="block: a transformer block's forward and backward (ch13/block.py, the default); "
                        "decode: one decode step of chapter 16's model")
    p.add_argument("--size", choices=("full", "tiny"), default=None, help="default: full on a GPU, tiny on a CPU")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="cuda or cpu (default: cuda where a GPU is visible, else cpu)")
    p.add_argument("--compile", choices=("none", "default", "max-autotune"), default="none",
                   help="profile the step under torch.compile in this mode (default none: eager)")
    p.add_argument("--steps", type=int, default=3, help="steps profiled in step 1")
    p.add_argument("--output", type=Path, default=None,
                   help="folder for the four steps' files (default: a new profiles/runs/<date>-walkthrough-<device>/)")
    p.add_argument("--skip", nargs="*", default=(), choices=("ncu", "nsys"), help="profilers not to run")
    p.add_argument("--ncu-launches", type=int, default=400,
                   help="kernel launches Nsight Compute profiles from the step's start (default 400; each is replayed "
                        "once per metric pass, so a decode step's hundreds of small kernels take minutes)")
    p.add_argument("--capture-child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    try:
        device = torch.device(a.device)
    except RuntimeError:
        return error(f"--device {a.device}: not a device PyTorch knows (cuda, cuda:N or cpu)")
    if device.type == "cuda" and not torch.cuda.is_available():
        return error(f"--device {a.device}: no CUDA GPU is visible to PyTorch (--device cpu runs the walkthrough's "
                     "small CPU block)")
    if device.type not in ("cuda", "cpu"):
        return error(f"--device {a.device}: the walkthrough profiles a CUDA GPU or the CPU")
    if a.output is not None and not a.capture_child:  # checked before the step is built: a bad folder fails at once
        try:
            a.output.mkdir(parents=True, exist_ok=True)   # the caller's folder, reused as given
        except OSError as e:
            return error(f"--output {a.output}: cannot use it as the report folder "
                         f"({'a file is in the way' if isinstance(e, (FileExistsError, NotADirectoryError)) else e})")
    size = a.size or ("full" if device.type == "cuda" else "tiny")
    step, desc = make_step(a.step, size, device, a.compile)
    for _ in range(3):  # warm up: cuBLAS handles, the caching allocator, compilation
        step()
    sync(device)
    if a.capture_child:  # under ncu or nsys: one step between cudaProfilerStart and Stop
        torch.cuda.profiler.start()
        step()
        sync(device)
        torch.cuda.profiler.stop()
        return 0
    out = a.output or new_run_folder(f"walkthrough-{device.type}")
    log(f"writing into {out}")
    child = ["--step", a.step, "--size", size, "--device", a.device, "--compile", a.compile]
    log(f"step 1: torch.profiler over {a.steps} steps of the {desc}")
    table, metrics, cpu_mem = profile_step(step, device, out, a.steps)
    log("step 2: memory")
    mem = memory_step(step, device, out, cpu_mem)
    ncu = {"skipped": "--skip ncu"} if "ncu" in a.skip else ncu_step(device, out, child, a.ncu_launches)
    nsys = {"skipped": "--skip nsys"} if "nsys" in a.skip else nsys_step(device, out, child)
    print(write_report(out, desc, device, table, metrics, mem, ncu, nsys))
    log(f"wrote {out}/walkthrough.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
