"""Profile a few calls of a prepared callable: a torch.profiler trace, an nsys/ncu capture range, the
kernels and launch calls one call makes, measured rather than claimed in a comment (a CUDA graph
replays many kernels from one launch call, a fused kernel replaces several), and the GPU's own time
per call where the host set the pace (gpu_busy_ms)."""
from __future__ import annotations

import os
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from common import nvtx


DETACH_S = 0.1   # how long _profiler makes CUDA calls after a profile, so that Kineto can detach CUPTI


@contextmanager
def _profiler(cuda: bool):
    """torch.profiler over the host (and the GPU where `cuda`), that leaves the next profile able to see the GPU.
    With TEARDOWN_CUPTI=1 (common.launch sets it in a CUDA run's workers) Kineto detaches CUPTI after a profile
    from a thread, inside the first CUDA call that thread sees; a profile started before that call loses its GPU
    events when it comes (pytorch/kineto#1554). On an H100 a --profile torch trace taken right after the kernel
    counts held no kernel and no runtime call. CUDA calls for a moment after each profile give the detach its call."""
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        with profile(activities=acts) as prof:
            yield prof
    finally:  # a profile that raised (gpu_busy_ms and count_launches go on without their figure) waits too
        if cuda and os.environ.get("TEARDOWN_CUPTI") == "1":
            end = time.perf_counter() + DETACH_S
            while time.perf_counter() < end:
                torch.cuda.synchronize()
                time.sleep(0.002)


def profile_calls(fn, label: str, mode: str | None, outdir: Path | None, calls: int = 5, *,
                  cuda: bool) -> str | None:
    """Run a few calls again under the requested profiler, each in a range named `label`. "torch": a
    torch.profiler trace, whose path is returned; "nsys" or "ncu" wrap this process and capture between
    cudaProfilerStart and Stop. `cuda` (the run's device is a GPU) is required: False (a CPU run) leaves CUDA
    alone even where a GPU is visible, with no GPU activity asked of CUPTI and no CUDA context made by a sync."""
    if mode == "torch":
        Path(outdir).mkdir(parents=True, exist_ok=True)
        with _profiler(cuda) as prof:
            for _ in range(calls):
                with record_function(label), nvtx.range(label):
                    fn()
            if cuda:
                torch.cuda.synchronize()
        path = Path(outdir) / f"{label.replace('/', '__')}.trace.json"
        prof.export_chrome_trace(str(path))
        return str(path)
    if mode:
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
        with nvtx.range(label):
            for _ in range(calls):
                fn()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
    return None


def gpu_busy_ms(fn, between, calls: int = 5) -> float | None:
    """How long the GPU works on one call, apart from the host time between its kernels: the union of the device
    activity (kernels, copies, fills) launched inside the call, from torch.profiler, median over `calls` calls.
    `between()` runs before each call as in the timed rounds (new values, the L2 scrub); its own device work is
    not counted. None where there is no GPU, the profiler cannot start, or it saw no device work in a call."""
    if not torch.cuda.is_available():
        return None
    try:
        torch.cuda.synchronize()
        with _profiler(cuda=True) as prof:
            for _ in range(calls):
                with record_function("harness.between"):
                    between()
                with record_function("harness.call"):
                    fn()
            torch.cuda.synchronize()
        return call_device_ms(prof.events(), calls)
    except Exception:  # a profiler that cannot start here costs the figure, not the run
        return None


LAUNCHES = ("Launch", "Memcpy", "Memset")   # the runtime calls that put work on the device (cudaGraphLaunch too)


def call_device_ms(events, calls: int) -> float | None:
    """Per "harness.call" range: the union of the device intervals launched inside it, in ms; their median. A
    device event is tied to its launch by correlation id: the runtime call (cudaLaunchKernel, cuLaunchKernelEx,
    cudaGraphLaunch, cudaMemcpyAsync...) that has its id, whose host time falls in one range or another. Left out:
    device events tied to no launch, and the device's copies of record_function ranges, which span the gaps
    between their kernels. None where a range has no device work (a profiler that saw no device activity)."""
    cpu = [e for e in events if e.device_type == DeviceType.CPU]
    ranges = sorted((e.time_range.start, e.time_range.end) for e in cpu if e.name == "harness.call")
    if len(ranges) != calls:
        return None
    runtime = {e.id: e for e in cpu if e.name.startswith("cu") and any(k in e.name for k in LAUNCHES)}
    spans: list[list] = [[] for _ in ranges]
    for e in events:
        if e.device_type != DeviceType.CUDA or getattr(e, "is_user_annotation", False) or \
                e.name.startswith("harness."):
            continue
        launch = runtime.get(e.id)
        host = launch.time_range.start if launch else None
        k = next((i for i, (start, end) in enumerate(ranges) if host is not None and start <= host <= end), None)
        if k is not None:
            spans[k].append((e.time_range.start, e.time_range.end))
    if not all(spans):
        return None
    return statistics.median([union_us(intervals) / 1e3 for intervals in spans])


def union_us(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by (start, end) intervals: busy time when kernels overlap on streams."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0.0)


def count_launches(fn, calls: int = 3) -> dict | None:
    """Per call, from torch.profiler: kernels_per_call, GPU kernel executions (a graph replay counts each kernel
    it runs), and launch_calls_per_call, the host's launch API calls (cudaLaunchKernel, cuLaunchKernel,
    cudaGraphLaunch, ...). None where there is no GPU or the profiler is unavailable."""
    if not torch.cuda.is_available():
        return None
    try:
        torch.cuda.synchronize()
        with _profiler(cuda=True) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
        events = prof.events()
        kernels = sum(1 for e in events if e.device_type == DeviceType.CUDA
                      and not e.name.startswith(("Memcpy", "Memset", "[memory]")))
        launches = sum(1 for e in events if e.device_type == DeviceType.CPU and "Launch" in e.name
                       and e.name.startswith(("cuda", "cu")))
        return {"kernels_per_call": kernels / calls, "launch_calls_per_call": launches / calls}
    except Exception:  # a profiler that cannot start here costs the counts, not the run
        return None
