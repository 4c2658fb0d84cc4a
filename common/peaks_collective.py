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

from common.timing import time_call


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
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl")
        dtype = torch.bfloat16
    else:
        device, dtype = torch.device("cpu"), torch.float32  # Gloo reduces fp32
        dist.init_process_group("gloo")
    agree_dev = device

    def agree(x: float) -> float:
        t = torch.tensor([float(x)], dtype=torch.float64, device=agree_dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    out = {"world_size": world, "backend": dist.get_backend()}
    for name, nbytes in (("large", a.large_mib * 2**20), ("small", a.small_kib * 2**10)):
        n = int(nbytes) // torch.tensor([], dtype=dtype).element_size()
        buf = torch.randn(n, device=device).to(dtype)
        ms = agree(time_call(lambda: dist.all_reduce(buf), device, budget_s=a.budget, agree=agree).median_ms)
        if name == "large":
            out["allreduce_bytes"] = n * buf.element_size()
            out["allreduce_busbw_gbps"] = n * buf.element_size() / (ms * 1e-3) / 1e9 * 2 * (world - 1) / world
        else:
            out.update(allreduce_small_bytes=n * buf.element_size(), allreduce_small_us=ms * 1e3)
    if rank == 0:
        a.out.write_text(json.dumps(out, indent=2))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
