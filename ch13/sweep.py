"""What the chapter's GPU scripts share: the one-line refusal, and two timers.

- `error(message)`: one `error:` line on stderr, exit status 2 (the walkthrough and graph_memory use it too).

- `cannot_sweep(out, what, triton=True)`: why a GPU sweep cannot run here, printed as one `error:` line with
  exit status 2 (the script returns it), or None: `--out` names a file, no CUDA GPU, no Triton.
- `time_ms(fn)`: CUDA events around each call, the median after warm-up (a call's time as a program
  without a graph sees it, the host's launch included).
- `graph_time_ms(fn, calls)`: the calls captured in one CUDA graph and replayed (the kernels back to back,
  no host in the way), beside the same calls launched one by one.
"""
from __future__ import annotations

import sys
from pathlib import Path


def error(message: str) -> int:
    """One line on stderr and exit status 2: what cannot run here, without a traceback."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 2


def cannot_sweep(out: Path, what: str, triton: bool = True) -> int | None:
    """2 (after one `error:` line) where the sweep cannot run: out is a file, no CUDA GPU, or (triton) no
    Triton; None where it can. `what` completes "the sweep times ... on a GPU"."""
    if out.exists() and not out.is_dir():
        return error(f"--out {out} is a file, not a folder")
    import torch
    if not torch.cuda.is_available():
        return error(f"the sweep times {what} on a GPU; none is visible to PyTorch")
    if triton:
        try:
            import triton  # noqa: F401
        except ImportError as e:
            return error(f"the sweep needs Triton, which this Python cannot import ({e})")
    return None


def time_ms(fn, reps: int = 20) -> float:
    """Median ms of `reps` calls of fn, each between two CUDA events, after 3 warm-up calls."""
    import torch
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def graph_time_ms(fn, calls: int, reps: int = 30) -> tuple[float, float]:
    """(device ms, host-inclusive ms) per call of fn(i), i = 0 .. calls-1 (e.g. over weight copies larger than
    L2). Device: the calls captured in one CUDA graph, the median of `reps` replays over `calls` (the kernels
    back to back, no host in the way). Host-inclusive: the same calls launched one by one from Python, as a
    program without a graph pays them."""
    import torch
    for i in range(calls):
        fn(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i)
    return tuple(time_ms(launch, reps) / calls for launch in (graph.replay, lambda: [fn(i) for i in range(calls)]))
