"""Profile a few calls of a prepared callable: a torch.profiler trace, an nsys/ncu capture range, and
the kernels and launch calls one call makes, measured rather than claimed in a comment (a CUDA graph
replays many kernels from one launch call, a fused kernel replaces several)."""
from __future__ import annotations

from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from common import nvtx


def torch_trace(fn, label: str, outdir: Path, calls: int = 5, *, cuda: bool) -> str:
    """A torch.profiler trace of `calls` calls, each in a range named `label`; returns the trace's path.
    `cuda` (the run's device is a GPU) is required: False (a CPU run) leaves CUDA alone even where a GPU is
    visible, with no GPU activity asked of CUPTI and no CUDA context made by a synchronize."""
    Path(outdir).mkdir(parents=True, exist_ok=True)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(calls):
            with record_function(label), nvtx.range(label):
                fn()
        if cuda:
            torch.cuda.synchronize()
    path = Path(outdir) / f"{label.replace('/', '__')}.trace.json"
    prof.export_chrome_trace(str(path))
    return str(path)


def capture_range(fn, label: str, calls: int = 5, *, cuda: bool) -> None:
    """nsys / ncu wrap this process and capture between cudaProfilerStart and Stop (a CUDA run only)."""
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    with nvtx.range(label):
        for _ in range(calls):
            fn()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


def profile_calls(fn, label: str, mode: str | None, outdir: Path | None, calls: int = 5, *,
                  cuda: bool) -> str | None:
    """Run a few calls again under the requested profiler; returns the trace path for "torch"."""
    if mode == "torch":
        return torch_trace(fn, label, outdir, calls, cuda=cuda)
    if mode:
        capture_range(fn, label, calls, cuda=cuda)
    return None


def count_launches(fn, calls: int = 3) -> dict | None:
    """Per call, from torch.profiler: kernels_per_call, GPU kernel executions (a graph replay counts each kernel
    it runs), and launch_calls_per_call, the host's launch API calls (cudaLaunchKernel, cuLaunchKernel,
    cudaGraphLaunch, ...). None where there is no GPU or the profiler is unavailable."""
    if not torch.cuda.is_available():
        return None
    try:
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
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
