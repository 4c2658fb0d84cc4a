"""A Gantt chart of a torch.profiler trace's GPU activity, one row per CUDA stream: kernels and each copy direction
in their own colour, so a reader sees at a glance whether copies and compute overlap."""
from __future__ import annotations

import io
import json
from pathlib import Path

from common.files import atomic_write

KINDS = (("HtoD", "tab:orange", "copy host→device"), ("DtoH", "tab:green", "copy device→host"),
         ("kernel", "tab:blue", "kernel"), ("other", "tab:gray", "other copy / memset"))


def gpu_events(trace: dict) -> list[dict]:
    """[{stream, start_us, dur_us, kind, name}] for every GPU-side event of a Chrome trace from torch.profiler."""
    out = []
    for ev in trace.get("traceEvents", []):
        cat, name = ev.get("cat", ""), ev.get("name", "")
        if ev.get("ph") == "X" and cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            kind = "kernel" if cat == "kernel" else "HtoD" if "HtoD" in name else "DtoH" if "DtoH" in name else "other"
            out.append({"stream": (ev.get("args") or {}).get("stream", ev.get("tid")), "start_us": float(ev["ts"]),
                        "dur_us": float(ev.get("dur", 0)), "kind": kind, "name": name})
    return out


def draw_gantt(trace_path: Path, png_path: Path, title: str) -> int:
    """Write the chart; returns the number of GPU events drawn (0 when the trace has none, e.g. on a CPU)."""
    events = gpu_events(json.loads(Path(trace_path).read_text()))
    if not events:
        return 0
    import matplotlib  # heavy: only where a pair's timeline is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t0 = min(e["start_us"] for e in events)
    streams = sorted({e["stream"] for e in events}, key=str)
    fig, ax = plt.subplots(figsize=(11, 0.6 * len(streams) + 1.6))
    for row, s in enumerate(streams):
        for kind, colour, _ in KINDS:
            bars = [((e["start_us"] - t0) / 1e3, max(e["dur_us"], 0.5) / 1e3) for e in events
                    if e["stream"] == s and e["kind"] == kind]
            if bars:
                ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colour)
    ax.set_yticks(range(len(streams)), [f"stream {s}" for s in streams])
    ax.set_xlabel("ms since the first GPU event")
    ax.set_title(title, fontsize=10)
    ax.legend(handles=[matplotlib.patches.Patch(color=c, label=label) for _, c, label in KINDS], fontsize=8,
              loc="upper right")
    ax.grid(True, axis="x", lw=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write(png_path, [buf.getvalue()])
    return len(events)
