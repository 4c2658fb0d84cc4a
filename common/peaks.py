"""Measure the device's ceilings once and cache them per device under profiles/peaks/ (README.md, "Ceilings").

copy_gbps      a 1 GiB device-to-device copy, bytes read + bytes written
h2d_gbps       a 256 MiB pinned host-to-device copy (a "transfer" pair's link)
duplex_gbps    256 MiB each way at once on two streams, bytes in both directions (a pair streaming in and out)
p2p_gbps       two or more GPUs: a 256 MiB copy from GPU 0 to GPU 1 (a "link" pair's ceiling)
nccl           two or more GPUs: NCCL's 256 MiB bf16 all-reduce bus bandwidth and 8 KiB latency (peaks_collective)
matmul_tflops  8192^3 products in fp32, tf32, bf16, fp16 and, where the GPU has fp8 tensor cores, fp8 (`_fp8_tflops`):
               the best operand layout, sustained or in bursts (`_best_rate`; matmul_how names the winning way)
launch_us      per-call time of a tiny kernel launched back to back

Each is timed as the pairs are (common.timing.time_call); a CPU gets the same names at smaller sizes.
"""
from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from common.files import atomic_write_json
from common.launch import torchrun, worker_env
from common.pair import REPO_ROOT
from common.timing import time_call

# Per machine, not committed. Tests point PERF_PEAKS_DIR elsewhere: ceilings measured under their load are too low.
PEAKS_DIR = Path(os.environ.get("PERF_PEAKS_DIR") or REPO_ROOT / "profiles" / "peaks")
PEAKS_VERSION = 8  # bump when the method changes: older caches are measured again
BURST_CALLS = 50   # back-to-back calls in one burst, timed as a whole with CUDA events


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def peaks_path(device: torch.device, peaks_dir: Path = PEAKS_DIR) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device_name(device)).strip("-").lower()
    return peaks_dir / f"{device.type}-{slug}.json"


def burst_ms(fn, device, warmup: int = 5) -> float:
    """Per-call ms of the fastest of 3 bursts, each `warmup` calls, then BURST_CALLS timed with CUDA events (a
    benchmark loop's way). CUDA only."""
    best = float("inf")
    for _ in range(3):
        for _ in range(warmup):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(BURST_CALLS):
            fn()
        end.record()
        torch.cuda.synchronize(device)
        best = min(best, start.elapsed_time(end) / BURST_CALLS)
    return best


def _best_rate(calls: dict, flops: float, device, budget_s: float) -> tuple[float, str, float]:
    """(best TFLOP/s, "<call>, <how>", sustained TFLOP/s of the fastest) of `calls` ({name: fn}). A benchmark loop
    times a burst, often on a chip idle a moment before (boost clocks, no power cap yet); the harness times under
    sustained load. The ceiling is the best of both: a burst of each after a 1 s pause, then the fastest sustained."""
    rate = {}
    if torch.device(device).type == "cuda":
        for name, fn in calls.items():
            time.sleep(1.0)  # let the chip leave its power cap, as a user's fresh benchmark finds it
            rate[name] = flops / (burst_ms(fn, device) * 1e-3) / 1e12
    fastest = max(rate, key=rate.get) if rate else next(iter(calls))
    ms = time_call(calls[fastest], device, budget_s=budget_s, compute_bound=True).median_ms
    sustained = flops / (ms * 1e-3) / 1e12
    if not rate or sustained >= rate[fastest]:
        return sustained, f"{fastest}, sustained", sustained
    return rate[fastest], f"{fastest}, burst", sustained


def _matmul_tflops(device, dtype, n, tf32: bool, budget_s) -> tuple[float, str, float]:
    """A dense n^3 product in every operand layout cuBLAS distinguishes (A·B, A·Bᵀ, Aᵀ·B): the best."""
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    layouts = {"A·B": lambda: torch.mm(a, b)}
    if torch.device(device).type == "cuda":
        layouts.update({"A·Bᵀ": lambda: torch.mm(a, b.t()), "Aᵀ·B": lambda: torch.mm(a.t(), b)})
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        return _best_rate(layouts, 2 * n**3, device, budget_s)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def _fp8_tflops(device, n, budget_s) -> dict[str, tuple[float, str, float]]:
    """The e4m3 rates with fast accumulation ("fp8") and without ("fp8_accurate": partial sums promoted to fp32
    more often); {} before sm_89 or where torch lacks them."""
    if torch.cuda.get_device_capability(device) < (8, 9) or not hasattr(torch, "float8_e4m3fn"):
        return {}
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device=device, generator=g).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
    one = torch.ones((), device=device)
    out = {}
    try:
        for key, fast in (("fp8", True), ("fp8_accurate", False)):
            call = lambda fast=fast: torch._scaled_mm(  # noqa: E731
                a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast)
            out[key] = _best_rate({"_scaled_mm A·Bᵀ" + (" fast accumulation" if fast else ""): call}, 2 * n**3,
                                  device, budget_s)
    except (RuntimeError, TypeError):  # an older torch or cuBLASLt without this path: the rates measured so far
        pass
    return out


def _gbps(fn, nbytes: int, device, budget_s: float) -> float:
    """GB/s of `nbytes` moved by each call of `fn`, timed as the pairs are."""
    return nbytes / (time_call(fn, device, budget_s=budget_s).median_ms * 1e-3) / 1e9


def _copy_gbps(device, n_bytes: int, budget_s: float, to: str | None = None) -> float:
    """A copy of `n_bytes` within `device` (bytes read + bytes written), or from it to the GPU `to` (bytes sent)."""
    src = torch.randint(0, 2**31 - 1, (n_bytes // 4,), dtype=torch.int32, device=device)
    dst = torch.empty_like(src, device=to or device)
    return _gbps(lambda: dst.copy_(src), n_bytes if to else 2 * n_bytes, device, budget_s)


def _duplex_gbps(host: torch.Tensor, dev: torch.Tensor, budget_s: float) -> float:
    """Both copy engines at once: host->device on one stream, device->host on another."""
    host_out = torch.empty_like(host).pin_memory()
    dev_src = torch.empty_like(dev).copy_(dev)
    up, down = torch.cuda.Stream(), torch.cuda.Stream()

    def both():
        main = torch.cuda.current_stream()
        for s in (up, down):
            s.wait_stream(main)
        with torch.cuda.stream(up):
            dev.copy_(host, non_blocking=True)
        with torch.cuda.stream(down):
            host_out.copy_(dev_src, non_blocking=True)
        for s in (up, down):
            main.wait_stream(s)
    return _gbps(both, 2 * host.numel() * host.element_size(), dev.device, budget_s)


def collective_peaks(nproc: int, device_type: str, log=print, extra: tuple = ()) -> dict | None:
    """Run common.peaks_collective under torchrun, one process per GPU; None (said) if it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "nccl.json"
        cmd = torchrun(nproc, "common.peaks_collective", "--out", str(out), "--device", device_type, *extra)
        proc = subprocess.run(cmd, env=worker_env(device_type), cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=600)
        if proc.returncode != 0 or not out.exists():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            log(f"  all-reduce ceilings not measured: {last[-200:]}")
            return None
        result = json.loads(out.read_text())
    log(f"  all-reduce      {result['allreduce_busbw_gbps']:8.1f} GB/s bus bandwidth "
        f"({result['allreduce_bytes'] / 2**20:.0f} MiB), {result['allreduce_small_us']:.1f} us at "
        f"{result['allreduce_small_bytes'] / 2**10:.0f} KiB ({result['backend']}, {nproc} processes)")
    return result


def measure_peaks(device: torch.device, budget_s: float = 2.0, log=print) -> dict:
    device = torch.device(device)
    on_gpu = device.type == "cuda"
    peaks: dict = {"device": device_name(device), "device_type": device.type, "torch": torch.__version__,
                   "version": PEAKS_VERSION}
    peaks["copy_gbps"] = _copy_gbps(device, (1 << 30) if on_gpu else (256 << 20), budget_s)
    log(f"  copy            {peaks['copy_gbps']:8.1f} GB/s (read + write)")
    if on_gpu:
        host = torch.randint(0, 2**31 - 1, (64 << 20,), dtype=torch.int32).pin_memory()
        dev = torch.empty(host.shape, dtype=host.dtype, device=device)
        peaks["h2d_gbps"] = _gbps(lambda: dev.copy_(host, non_blocking=True), host.numel() * 4, device, budget_s)
        log(f"  host->device    {peaks['h2d_gbps']:8.1f} GB/s (pinned)")
        peaks["duplex_gbps"] = _duplex_gbps(host, dev, budget_s)
        log(f"  both ways       {peaks['duplex_gbps']:8.1f} GB/s (host->device and device->host at once)")
        del host, dev
        if torch.cuda.device_count() > 1:
            peaks["p2p_gbps"] = _copy_gbps(torch.device("cuda:0"), 256 << 20, budget_s, to="cuda:1")
            log(f"  GPU0 -> GPU1    {peaks['p2p_gbps']:8.1f} GB/s")
            peaks["nccl"] = collective_peaks(torch.cuda.device_count(), "cuda", log=log)
    n = 8192 if on_gpu else 1024
    rates, how, sustained = {}, {}, {}
    precisions = (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                  ("bf16", torch.bfloat16, False), ("fp16", torch.float16, False))
    for prec, dtype, tf32 in precisions if on_gpu else precisions[:1]:  # a CPU has no such units: fp32 stands in
        rates[prec], how[prec], sustained[prec] = _matmul_tflops(device, dtype, n, tf32, budget_s)
        log(f"  matmul {prec:5s}    {rates[prec]:8.2f} TFLOP/s ({n}^3, {how[prec]}; sustained {sustained[prec]:.2f})")
    if on_gpu:
        for key, (rate, way, held) in _fp8_tflops(device, n, budget_s).items():
            rates[key], how[key], sustained[key] = rate, way, held
            log(f"  matmul {key:12s} {rate:8.2f} TFLOP/s ({n}^3, e4m3, {way}; sustained {held:.2f})")
    else:
        rates.update(tf32=rates["fp32"], bf16=rates["fp32"], fp16=rates["fp32"])
    # matmul_sustained_tflops: what the fastest call holds under load (pairs are timed so)
    peaks.update(matmul_tflops=rates, matmul_how=how, matmul_sustained_tflops=sustained, matmul_n=n)
    x = torch.randn(1, device=device)
    peaks["launch_us"] = time_call(lambda: x.add_(1.0), device, budget_s=budget_s).median_ms * 1e3
    log(f"  launch          {peaks['launch_us']:8.2f} us per tiny op")
    return peaks


def cached_peaks(path: Path) -> dict | None:
    """The ceilings cached at `path`; None where there are none, the file is damaged, or another torch or an older
    method (PEAKS_VERSION) measured them."""
    try:
        cached = json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return cached if cached.get("torch") == torch.__version__ and cached.get("version") == PEAKS_VERSION else None


def load_or_measure(device: torch.device, refresh: bool = False, peaks_dir: Path = PEAKS_DIR, log=print) -> dict:
    """Cached ceilings for this device, measuring them first if there are none usable (or `refresh`)."""
    path = peaks_path(torch.device(device), peaks_dir)
    cached = None if refresh else cached_peaks(path)
    if cached:
        return cached
    where = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    log(f"measuring the ceilings of {device_name(torch.device(device))} (cached in {where})")
    peaks = measure_peaks(torch.device(device), log=log)
    atomic_write_json(path, peaks)
    return peaks


def invalidate(path: Path, reason: str, log=print) -> None:
    """Drop cached ceilings a verified result beat (the physics check's rule): the next run measures them again."""
    try:
        Path(path).unlink()
    except FileNotFoundError:  # never measured, or dropped a moment ago by another run
        return
    log(f"ceilings in {path} dropped: {reason}; they are measured again on the next run")
