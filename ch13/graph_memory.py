"""Graphs and memory: what a CUDA graph per input length costs, against bucketing and against eager.

    python ch13/graph_memory.py [--quick] [--out DIR]

The compile_shapes pair's model (2 blocks, d=1024, bf16, no_grad) and lengths (100, 180, ..., 660 tokens),
fed one length at a time, 3 calls each as the pair's prepare does (compile and warm up, record, replay):
  eager       no graphs; the caching allocator keeps the largest activations' blocks reserved
  per_length  torch.compile(mode="reduce-overhead") as optimized_compile_shapes: a CUDA graph per new length
  bucketed    the same, each batch padded to a multiple of 256 tokens as optimized_compile_shapes_bucketed
After each length, in MiB above the built model and inputs: allocated (live tensors), reserved (held from
the GPU, cudagraph pools included), the peak allocated during that length's calls, and the graphs so far
(distinct padded shapes; beside them torch's own count, read through a private API: "n/a" if it changed).
Each strategy runs in a fresh subprocess, as cudagraph trees keep their memory pool for the life of the
process (torch._dynamo.reset() does not reliably return it): a strategy run second would start from the
first one's pool. The parent gathers one JSON line from each.

Writes graph_memory.json, .md, .png and memory_snapshot_<strategy>.pickle for the graph strategies (drag it
onto https://pytorch.org/memory_viz). The figure: a panel per strategy, x the lengths in the order fed,
y MiB above the model and inputs; solid reserved, dashed allocated, dotted the peak; the number over each
point is the graphs so far: reserved climbing with them is the price of a graph per shape. GPU, Triton only.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from ch13.baseline_compile_shapes import batches, workload  # noqa: E402
from ch13.optimized_compile_shapes import compiled  # noqa: E402
from ch13.optimized_compile_shapes_bucketed import BUCKET  # noqa: E402
from ch13.sweep import error  # noqa: E402

STRATEGIES = ("eager", "per_length", "bucketed")
CALLS_PER_LENGTH = 3
CHILD_TIMEOUT_S = 420  # one strategy: two compiles of two blocks (static shapes, then dynamic) and 8 recordings
MIB = 2**20


def padded_length(t: int, strategy: str) -> int:
    return -(-t // BUCKET) * BUCKET if strategy == "bucketed" else t


def graphs_so_far(ts, strategy: str) -> list[int]:
    """Graphs recorded after each length of ts: one per distinct padded shape; eager records none."""
    if strategy == "eager":
        return [0] * len(ts)
    return [len({padded_length(t, strategy) for t in ts[:i + 1]}) for i in range(len(ts))]


def torch_graph_count():
    """The graphs in torch's cudagraph trees (private: 'n/a' wherever that API differs or fails)."""
    try:
        from torch._inductor import cudagraph_trees
        manager = cudagraph_trees.get_manager(torch.cuda.current_device(), create_if_none_exists=False)
        nodes, count = ([] if manager is None else [n for ns in manager.roots.values() for n in ns]), 0
        while nodes:  # a graph recorded while another's outputs are live is that one's child
            count += 1
            nodes.extend(c for cs in nodes.pop().children.values() for c in cs)
        return count
    except Exception:
        return "n/a"


def memory_bytes():
    """(allocated, reserved, peak allocated since the last reset), once the queued work has finished."""
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), torch.cuda.max_memory_allocated()


def make_step(strategy: str, model):
    """One batch through the model as the pair's timed call serves it; the caller drops the output."""
    if strategy == "eager":
        return model
    fn = compiled(model)
    if strategy == "per_length":
        return lambda x: fn(x).clone()  # cloned: the graph's next replay overwrites its output
    buffers = {}  # one per bucket, made when the bucket is first seen: part of that length's cost

    def bucketed(x):
        b, t, d = x.shape
        key = (b, padded_length(t, strategy))
        if key not in buffers:
            buffers[key] = x.new_zeros(b, key[1], d)
        buffers[key][:, :t].copy_(x)  # causal attention: the padded tail never reaches a real position
        return fn(buffers[key])[:, :t].clone()
    return bucketed


def measure(strategy: str, quick: bool, out: Path, device="cuda") -> dict:
    """One strategy in this process, a row per length fed (the tests pass "cpu" and fake memory readers)."""
    snapshot = None
    if strategy != "eager" and torch.device(device).type == "cuda":  # before the model: the snapshot shows the weights
        try:  # Python stacks only: C++ unwinding is slow and makes the file large
            torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
            snapshot = f"memory_snapshot_{strategy}.pickle"
        except Exception as e:
            print(f"  no memory snapshot: _record_memory_history failed ({type(e).__name__}: {e})", file=sys.stderr)
    w = workload(0, device, quick)
    model, xs = w.inputs["model"], batches(w)
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()
    base_alloc, base_reserved, _ = memory_bytes()
    step, rows = make_step(strategy, model), []
    for x, graphs in zip(xs, graphs_so_far([x.shape[1] for x in xs], strategy)):
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        with torch.no_grad():
            for _ in range(CALLS_PER_LENGTH):
                step(x)
        alloc, reserved, peak = memory_bytes()
        r = {"length": x.shape[1], "padded_length": padded_length(x.shape[1], strategy), "graphs": graphs,
             "torch_graphs": 0 if strategy == "eager" else torch_graph_count(),
             "allocated_mib": (alloc - base_alloc) / MIB, "reserved_mib": (reserved - base_reserved) / MIB,
             "peak_mib": (peak - base_alloc) / MIB, "seconds": time.perf_counter() - t0}
        rows.append(r)
        print(f"  {strategy} length {r['length']} (padded {r['padded_length']}): graphs {graphs} (torch: "
              f"{r['torch_graphs']}), allocated {r['allocated_mib']:+.1f} MiB, reserved {r['reserved_mib']:+.1f} "
              f"MiB, peak {r['peak_mib']:+.1f} MiB, {r['seconds']:.1f} s", file=sys.stderr, flush=True)
    try:
        if snapshot:
            out.mkdir(parents=True, exist_ok=True)
            torch.cuda.memory._dump_snapshot(str(out / snapshot))
            torch.cuda.memory._record_memory_history(enabled=None)
            print(f"  wrote {snapshot} ({(out / snapshot).stat().st_size / MIB:.1f} MiB)", file=sys.stderr)
    except Exception as e:
        print(f"  no memory snapshot: _dump_snapshot failed ({type(e).__name__}: {e})", file=sys.stderr)
        snapshot = None
    try:  # cudagraphs skipped (a fallback to no graph) would make the graph counts above fiction
        skips = int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])
    except Exception:
        skips = "n/a"
    return {"strategy": strategy, "device": torch.cuda.get_device_name() if device == "cuda" else device,
            "torch": torch.__version__, "config": dataclasses.asdict(model[0].cfg), "cudagraph_skips": skips,
            "baseline_allocated_mib": base_alloc / MIB, "baseline_reserved_mib": base_reserved / MIB,
            "snapshot": snapshot, "rows": rows}


def run_strategy(strategy: str, quick: bool, out: Path) -> dict:
    """measure() in a fresh process; its stderr (progress lines, or a traceback) passes straight through."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--strategy", strategy, "--out", str(out)]
    r = subprocess.run(cmd + (["--quick"] if quick else []), stdout=subprocess.PIPE, text=True, timeout=CHILD_TIMEOUT_S)
    found = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not found:
        raise RuntimeError(f"the {strategy} run failed with exit status {r.returncode} (its stderr is above)")
    return json.loads(found[-1])


def markdown(result: dict) -> str:
    runs = result["strategies"]
    lines = [f"# CUDA graphs and memory ({result['device']}, torch {result['torch']})", "",
             f"MiB above the model and inputs ({runs[0]['baseline_allocated_mib']:.1f} MiB), after {CALLS_PER_LENGTH} "
             f"calls per length (warm-up, record, replay); bucket {BUCKET} tokens; peak: the most allocated during "
             "that length's calls.", "", "| strategy | length | padded length | graphs so far | torch's graph count "
             "| allocated MiB | reserved MiB | peak MiB |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in runs:
        lines += [f"| {s['strategy']} | {r['length']} | {r['padded_length']} | {r['graphs']} | {r['torch_graphs']} | "
                  f"{r['allocated_mib']:.1f} | {r['reserved_mib']:.1f} | {r['peak_mib']:.1f} |" for r in s["rows"]]
    eager = next((s["rows"][-1]["reserved_mib"] for s in runs if s["strategy"] == "eager"), None)
    lines.append("")
    for s in runs:
        last = s["rows"][-1]
        versus = "" if eager is None else f", {last['reserved_mib'] - eager:+.1f} MiB against eager"
        lines.append(f"- {s['strategy']}: {last['graphs']} graphs, final reserved {last['reserved_mib']:.1f} MiB"
                     f"{versus}; highest peak {max(r['peak_mib'] for r in s['rows']):.1f} MiB; "
                     f"cudagraph skips {s['cudagraph_skips']}")
    return "\n".join(lines) + "\n"


def draw(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = result["strategies"]
    fig, axes = plt.subplots(1, len(runs), figsize=(4 * len(runs), 3.6), sharey=True, squeeze=False)
    for ax, s in zip(axes[0], runs):
        rows, xs = s["rows"], list(range(len(s["rows"])))
        ax.plot(xs, [r["reserved_mib"] for r in rows], "o-", label="reserved")
        ax.plot(xs, [r["allocated_mib"] for r in rows], "s--", ms=4, label="allocated")
        ax.plot(xs, [r["peak_mib"] for r in rows], ":", label="peak during the length")
        for i, r in enumerate(rows):
            ax.annotate(str(r["graphs"]), (i, r["reserved_mib"]), textcoords="offset points", xytext=(0, 5),
                        ha="center", fontsize=7)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(r["length"]) for r in rows], fontsize=7)
        ax.set_title(f"{s['strategy']}: {rows[-1]['graphs']} graphs", fontsize=9)
        ax.set_xlabel("length fed (tokens, in order)", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("MiB above model and inputs")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{result['device']}: memory after each new length (numbers: graphs so far)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(result: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "graph_memory.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "graph_memory.md").write_text(markdown(result))
    draw(result, out / "graph_memory.png")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the tiny block and lengths 5..17: a fast smoke run")
    p.add_argument("--out", type=Path, default=ROOT / "profiles" / "runs" / "graph_memory")
    p.add_argument("--strategy", choices=STRATEGIES, help="internal: run one strategy here, print its JSON line")
    a = p.parse_args(argv)
    if a.out.exists() and not a.out.is_dir():
        return error(f"--out {a.out} is a file, not a folder")
    if not torch.cuda.is_available():
        return error("graph_memory measures CUDA graphs' memory on a GPU; none is visible to PyTorch")
    try:
        importlib.import_module("triton")
    except Exception as e:  # ImportError, or a Triton that cannot find its driver
        return error(f"torch.compile's CUDA graphs need Triton, which this Python cannot import ({e})")
    if a.strategy:
        print(json.dumps(measure(a.strategy, a.quick, a.out)), flush=True)
        return 0
    a.out.mkdir(parents=True, exist_ok=True)  # the children write their snapshots here
    runs = []
    for strategy in STRATEGIES:
        print(f"{strategy}: in a fresh process", flush=True)
        try:
            runs.append(run_strategy(strategy, a.quick, a.out))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    write_outputs({"device": runs[0]["device"], "torch": runs[0]["torch"], "quick": a.quick, "bucket": BUCKET,
                   "config": runs[0]["config"], "calls_per_length": CALLS_PER_LENGTH, "strategies": runs}, a.out)
    print(f"wrote {a.out}/graph_memory.json, .md, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
