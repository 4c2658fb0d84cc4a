"""The collective ceilings of a machine with several GPUs, measured by the engine the pairs use.

    python -m torch.distributed.run --standalone --nproc_per_node=N -m common.peaks_collective --out FILE

One process per GPU, started by common.peaks (`--peaks` with two or more GPUs), timed as the pairs are (slowest rank):
- allreduce_busbw_gbps  a 256 MiB bf16 all-reduce's bus bandwidth (nccl-tests: algbw x 2(n-1)/n), a bandwidth ceiling
- allreduce_small_us    an 8 KiB bf16 all-reduce's time, the fixed latency a small message pays
On CPUs (Gloo) the same code runs with small sizes, which is how the tests exercise it.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

from common.timing import max_over_ranks, time_call


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--large-mib", type=float, default=256)
    ap.add_argument("--small-kib", type=float, default=8)
    ap.add_argument("--budget", type=float, default=1.0)
    a = ap.parse_args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if a.device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        device, dtype = torch.device("cuda", int(os.environ["LOCAL_RANK"])), torch.bfloat16
        dist.init_process_group("nccl")
    else:
        device, dtype = torch.device("cpu"), torch.float32  # Gloo reduces fp32
        dist.init_process_group("gloo")

    def all_reduce(nbytes: float) -> tuple[int, float]:
        """(bytes, ms of the slowest rank) of an all-reduce of about `nbytes`."""
        buf = torch.randn(int(nbytes) // torch.tensor([], dtype=dtype).element_size(), device=device).to(dtype)
        ms = time_call(lambda: dist.all_reduce(buf), device, budget_s=a.budget, agree=max_over_ranks).median_ms
        return buf.numel() * buf.element_size(), max_over_ranks(ms)

    large, large_ms = all_reduce(a.large_mib * 2**20)
    small, small_ms = all_reduce(a.small_kib * 2**10)
    out = {"world_size": world, "backend": dist.get_backend(), "allreduce_bytes": large,
           "allreduce_busbw_gbps": large / (large_ms * 1e-3) / 1e9 * 2 * (world - 1) / world,
           "allreduce_small_bytes": small, "allreduce_small_us": small_ms * 1e3}
    if rank == 0:
        a.out.write_text(json.dumps(out, indent=2))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
