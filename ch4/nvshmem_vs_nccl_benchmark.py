"""All-reduce latency and bandwidth across message sizes: NCCL against torch symmetric memory,
with each symmetric-memory backend (default and NVSHMEM) in its own processes.

    torchrun --nproc_per_node=2 ch4/nvshmem_vs_nccl_benchmark.py            # everything (see below)
    torchrun --nproc_per_node=2 ch4/nvshmem_vs_nccl_benchmark.py --backend NVSHMEM --sizes 4K 64K 1M
    python ch4/nvshmem_vs_nccl_benchmark.py --nproc 2                       # the same, launching torchrun itself
    options: --output DIR (default: a new profiles/runs/<YYYYMMDD-HHMMSS>-ch4-allreduce/), --quick, --budget S

Methods, all on bf16 and all summing one message of S bytes per rank; each call first copies the
message into its communication buffer (as the chapter's pairs do), then reduces:
    nccl            dist.all_reduce (on CPUs this is Gloo: "gloo")
    symm_one_shot   torch.ops.symm_mem.one_shot_all_reduce: each rank reads every peer's buffer
    symm_two_shot   torch.ops.symm_mem.two_shot_all_reduce_: reduce-scatter then all-gather by loads
The symmetric-memory backend is chosen once per process and cannot change after the first
symmetric tensor exists, so a run without --backend measures NCCL and the default backend in this
process group, and then rank 0 starts a second torchrun for `--backend NVSHMEM` and merges both.

Every size is verified before it is timed: rank r's message holds the small integers
((i + r) mod 7) - 3, exact in bf16, so the sum over ranks is known exactly on every rank.
Bandwidth follows nccl-tests: algbw = S / t, busbw = algbw x 2(n-1)/n. The time t is the harness's
(common.timing.time_call, as for every pair): warm-up until the per-call time settles, then samples
(CUDA events on GPUs, the host clock on CPUs) in rounds until the median's 95% interval is under 1% of it
or --budget is spent, every rank taking each of those decisions together (the max over ranks); t is the
slowest rank's median. Each row also records the widest interval of a rank's median (median_ci_pct), the
timer and the samples. The message is not rewritten between samples: an all-reduce moves and adds the
same bytes whatever they hold.

Writes allreduce.json and allreduce.png (latency and busbw against size) into the output folder.
NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1 unless already set): no multimem operation is ever called.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
for _k, _v in MULTICAST_OFF.items():
    os.environ.setdefault(_k, _v)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from common.cli import ArgParser, prepare_output  # noqa: E402  (one error line and exit 2 for a bad command line)
from common.files import new_run_folder  # noqa: E402
from common.timing import BUDGET_S, QUICK_BUDGET_S, max_over_ranks, time_call  # noqa: E402

DTYPE = torch.bfloat16
ONE_SHOT_MAX = 16 << 20     # one-shot reads n x S per rank: beyond a few MiB two-shot wins anyway


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def default_sizes(device_type: str, quick: bool) -> list[int]:
    top = (1 << 20 if quick else 256 << 20) if device_type == "cuda" else (64 << 10 if quick else 1 << 20)
    sizes, s = [], 4 << 10
    while s <= top:
        sizes.append(s)
        s *= 4
    return sizes


def fmt_size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} B"


def message(numel: int, rank: int, device) -> torch.Tensor:
    return (((torch.arange(numel, device=device) + rank) % 7) - 3).to(DTYPE)


def expected_sum(numel: int, world: int, device) -> torch.Tensor:
    i = torch.arange(numel, device=device)
    return sum(((i + r) % 7) - 3 for r in range(world)).to(DTYPE)


def every_rank(ok: bool) -> bool:
    """True only where it is true on every rank (each rank checks its own copy of the sum)."""
    return max_over_ranks(0.0 if ok else 1.0) == 0.0


def timed(fn, device, budget_s: float) -> dict:
    """The harness's timing of one call (see the module docstring): the slowest rank's median seconds per call,
    and how it was taken (the widest interval of a rank's median, the timer, the samples)."""
    t = time_call(fn, device, budget_s=budget_s, agree=max_over_ranks)
    return {"s": max_over_ranks(t.median_ms / 1e3), "median_ci_pct": max_over_ranks(t.median_ci_pct),
            "timer": t.timer, "samples": t.samples, "calls_per_sample": t.calls_per_sample}


def methods(device, backend_label: str, symm_ok: bool):
    """(name, make(x) -> call) for this process group; symmetric memory only on GPUs."""
    def nccl(x):
        out = torch.empty_like(x)

        def call():
            out.copy_(x)
            dist.all_reduce(out)
            return out
        return call
    out = [("nccl" if device.type == "cuda" else "gloo", None, nccl)]
    if not symm_ok:
        return out
    import torch.distributed._symmetric_memory as symm_mem
    group = dist.group.WORLD.group_name

    def symm(op):
        def make(x):
            buf = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)
            handle = symm_mem.rendezvous(buf, group)

            def call():
                buf.copy_(x)
                if op == "one":
                    return torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group)
                torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group)
                return buf
            call.keepalive = handle
            return call
        return make
    return out + [("symm_one_shot", backend_label, symm("one")), ("symm_two_shot", backend_label, symm("two"))]


def sweep(args) -> dict:
    """This process group's part: NCCL/Gloo (unless --symm-only) and the chosen symmetric-memory backend."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    backend = args.backend or "default"
    unavailable = None
    if device.type != "cuda":
        unavailable = "symmetric memory is unavailable: no CUDA GPU (Gloo on CPUs runs the NCCL-equivalent path only)"
    else:
        import torch.distributed._symmetric_memory as symm_mem
        if backend == "NVSHMEM" and not symm_mem.is_nvshmem_available():
            unavailable = "NVSHMEM is not available in this torch build or on this machine"
        elif backend != "default":
            symm_mem.set_backend(backend)   # before this process's first symmetric tensor
    sizes = [parse_size(s) for s in args.sizes] if args.sizes else default_sizes(device.type, args.quick)
    budget_s = args.budget if args.budget is not None else QUICK_BUDGET_S if args.quick else BUDGET_S
    rows = []
    for name, label, make in methods(device, backend, unavailable is None):
        if args.symm_only and label is None:
            continue
        for size in sizes:
            if name == "symm_one_shot" and size > ONE_SHOT_MAX:
                continue
            numel = size // DTYPE.itemsize
            x = message(numel, rank, device)
            want = expected_sum(numel, world, device)
            fn = make(x)
            row = {"method": name, "symm_backend": label, "bytes": size,
                   "verified": every_rank(torch.equal(fn(), want))}    # verified before timing ...
            if row["verified"]:
                t = timed(fn, device, budget_s)
                s = t.pop("s")
                row.update(us=s * 1e6, algbw_gbps=size / s / 1e9, busbw_gbps=size / s / 1e9 * 2 * (world - 1) / world, **t)
                row["verified"] = every_rank(torch.equal(fn(), want))   # ... and after
            rows.append(row)
            if rank == 0:
                print(f"{name:14s} {label or '':8s} {fmt_size(size):>9s}  "
                      + (f"{row['us']:9.1f} us  busbw {row['busbw_gbps']:7.1f} GB/s  " if "us" in row else "")
                      + ("verified" if row["verified"] else "WRONG RESULT"), flush=True)
            del fn, x, want
            if device.type == "cuda":
                torch.cuda.synchronize()
    info = {"world_size": world, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "dist_backend": dist.get_backend(),
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if device.type == "cuda" else None,
            "env": {k: os.environ.get(k) for k in MULTICAST_OFF}, "results": rows,
            "symm_unavailable": {backend: unavailable} if unavailable else {}}
    dist.destroy_process_group()
    if unavailable and rank == 0:
        print(unavailable, flush=True)
    return info


TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
                 "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def launch(nproc: int, extra: list[str]) -> int:
    """A fresh torchrun of this file (from the driver, or from rank 0 after its own group is gone)."""
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS and not k.startswith("TORCHELASTIC_")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", __file__, *extra]
    return subprocess.run(cmd, env=dict(env, PYTHONPATH=str(ROOT)), cwd=ROOT).returncode


def merge(parts: list[dict]) -> dict:
    doc = dict(parts[0])
    doc["results"] = [r for p in parts for r in p["results"]]
    doc["symm_unavailable"] = {k: v for p in parts for k, v in p["symm_unavailable"].items()}
    doc["created"] = datetime.datetime.now().isoformat(timespec="seconds")
    doc["definitions"] = {"algbw": "message bytes per rank / time", "busbw": "algbw x 2(n-1)/n (nccl-tests)",
                          "time": "slowest rank's median per call (common.timing.time_call: warm-up, then samples "
                                  "in rounds until the median's 95% interval is under 1% or the budget is spent); "
                                  "each call copies the message into its buffer, then reduces",
                          "median_ci_pct": "the widest 95% interval of a rank's median, as % of that median"}
    return doc


def plot(doc: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(12, 4.5))
    series = {}
    for r in doc["results"]:
        if "us" in r:
            series.setdefault(r["method"] + (f" ({r['symm_backend']})" if r["symm_backend"] else ""), []).append(r)
    for label, rows in series.items():
        xs = [r["bytes"] for r in rows]
        ax_t.plot(xs, [r["us"] for r in rows], marker="o", label=label)
        ax_b.plot(xs, [r["busbw_gbps"] for r in rows], marker="o", label=label)
    for ax, ylabel in ((ax_t, "time per all-reduce (µs)"), (ax_b, "bus bandwidth (GB/s)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message per rank (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_yscale("log")
    ax_t.legend(fontsize=8)
    fig.suptitle(f"bf16 all-reduce, {doc['world_size']} x {doc['device']}")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)
    plt.close(fig)


def write(doc: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    plot(doc, out / "allreduce.png")
    tmp = out / "allreduce.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, out / "allreduce.json")
    print(f"wrote {out / 'allreduce.json'} and {out / 'allreduce.png'}", flush=True)


def output_folder(args) -> Path:
    """--output as given (the caller's to reuse), else a new folder of this run's own; printed either way."""
    out = args.output or new_run_folder("ch4-allreduce")
    print(f"writing into {out}", flush=True)
    return out


def exit_status(doc: dict) -> int:
    """1 when any result was wrong, or when a GPU run could not measure a symmetric-memory backend."""
    wrong = [r for r in doc["results"] if not r["verified"]]
    missing = doc["symm_unavailable"] if torch.cuda.is_available() else {}
    for why in missing.values():
        print(f"error: {why}", file=sys.stderr)
    return 1 if wrong or missing else 0


def positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: a budget is a positive number of seconds")
    return value


def size_arg(text: str) -> str:
    """A --sizes entry, checked when the command line is read, before any process or folder exists;
    passed on to the ranks as typed."""
    try:
        ok = parse_size(text) > 0
    except (ValueError, KeyError, IndexError):
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"{text!r}: a size is a positive byte count, e.g. 4096, 64K, 1M or 256MiB")
    return text


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number of processes")
    return int(text)


def cannot_run(nproc: int, local: int) -> str | None:
    """Why `nproc` processes, `local` of them on this machine (0: not known), cannot run here; None when they can."""
    if nproc < 2:
        return (f"{nproc} process: an all-reduce needs 2 or more processes "
                "(torchrun --nproc_per_node=2, or --nproc 2 without torchrun)")
    if torch.cuda.is_available() and torch.cuda.device_count() < local:
        return f"{local} processes need {local} GPUs, one each; {torch.cuda.device_count()} visible"
    return None


def main(argv=None) -> int:
    ap = ArgParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["default", "CUDA", "NVSHMEM"],
                    help="measure NCCL and this one symmetric-memory backend (default: NCCL and the default backend, "
                         "then, on GPUs, NVSHMEM in a second launch, merged into one report)")
    ap.add_argument("--sizes", nargs="+", type=size_arg, help="message sizes per rank, e.g. 4K 64K 1M 256M")
    ap.add_argument("--budget", type=positive_seconds, help=f"timing budget per size and method, seconds, warm-up not "
                    f"counted (default {BUDGET_S:g}, {QUICK_BUDGET_S:g} with --quick)")
    ap.add_argument("--quick", action="store_true", help="sizes up to 1 MiB on GPUs, 64 KiB on CPUs")
    ap.add_argument("--output", type=Path, help="folder for allreduce.json and allreduce.png")
    ap.add_argument("--nproc", type=positive_int, default=2, help="without torchrun: processes to launch (default 2)")
    ap.add_argument("--part", type=Path, help=argparse.SUPPRESS)        # internal: where a part writes its JSON
    ap.add_argument("--symm-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    passthrough = (["--sizes", *args.sizes] if args.sizes else []) + (["--budget", str(args.budget)] if args.budget is not None else []) \
        + (["--quick"] if args.quick else [])

    world = int(os.environ.get("WORLD_SIZE", args.nproc))   # processes on this machine: all of the driver's
    why = cannot_run(world, int(os.environ.get("LOCAL_WORLD_SIZE", 0 if "WORLD_SIZE" in os.environ else world)))
    # --output checked (and created) before any process runs, so a bad folder does not cost the whole sweep; the
    # folder is the caller's to reuse, so an earlier allreduce.json in it is no reason to refuse
    why = why or (prepare_output(args.output, report=None) if args.output else None)
    if why:                                  # before any process group: rank 0 says why, the others exit 0
        rank0 = os.environ.get("RANK", "0") == "0"
        if rank0:
            print(f"error: {why}", file=sys.stderr)
        return 2 if rank0 else 0
    if "WORLD_SIZE" not in os.environ:       # the driver: one torchrun per backend
        out = output_folder(args)
        parts = []
        for i, backend in enumerate(("default", "NVSHMEM") if torch.cuda.is_available() else ("default",)):
            part = out / f".part-{backend}.json"
            rc = launch(args.nproc, ["--backend", backend, "--part", str(part), *passthrough]
                        + (["--symm-only"] if i else []))
            if rc != 0 or not part.exists():
                print(f"error: the {backend} run failed (exit {rc})", file=sys.stderr)
                return 1
            parts.append(json.loads(part.read_text()))
            part.unlink()
        doc = merge(parts)
        write(doc, out)
        return exit_status(doc)

    info = sweep(args)
    rank0 = int(os.environ["RANK"]) == 0
    # Every rank agreed on each row's verdict; rank 0 writes them, and the report's exit status fails a wrong row.
    # The other ranks exit 0: one that exited 1 first would have torchrun stop rank 0 before it wrote anything.
    if args.part:                            # one part of a driver's run
        if rank0:
            args.part.parent.mkdir(parents=True, exist_ok=True)
            args.part.write_text(json.dumps(info))
        return 0
    if not rank0:
        return 0
    out = output_folder(args)                # rank 0 only: one folder per run
    parts = [info]
    if args.backend is None and not info["symm_unavailable"]:
        # The NVSHMEM backend needs processes that have not allocated symmetric memory yet.
        part = out / ".part-NVSHMEM.json"
        rc = launch(int(os.environ["WORLD_SIZE"]), ["--backend", "NVSHMEM", "--symm-only", "--part", str(part), *passthrough])
        if rc == 0 and part.exists():
            parts.append(json.loads(part.read_text()))
            part.unlink()
        else:
            info["symm_unavailable"]["NVSHMEM"] = f"the NVSHMEM run failed (exit {rc})"
    doc = merge(parts)
    write(doc, out)
    return exit_status(doc)


if __name__ == "__main__":
    sys.exit(main())
