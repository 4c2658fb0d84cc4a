"""Update one field of 32M particle records stored as an array of structs (AoS).

Workload: 32M records of 16 fp32 fields (64 bytes each, 2 GiB); one step
computes the new x position, x + vx * dt, reading field 0 (x) and field 8
(vx) of every record. Stored record by record, neighbouring threads read
addresses 64 bytes apart: each 32-byte memory sector fetched carries 4
useful bytes, so the GPU moves ~8x more bytes than the step needs.

The workload holds the same particles in both layouts (`records`, AoS, and
`fields`, SoA): the layout is a choice a program makes when it allocates its
data, so each side of the pair reads the one it chose. Both are per-call
inputs (the particles change every step); nothing is prepared once. `fields`
is declared derived from `records`: the harness's new values for each step go
into both layouts alike.

Bound: memory. Useful bytes: 2 reads + 1 write of 4 bytes per record
(384 MiB); bytes actually moved through DRAM: ~2 x 32 + 4 per record.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "memory"
FIELDS, X, VX, DT = 16, 0, 8, 0.01


def workload(seed: int, device, quick: bool = False) -> Workload:
    on_gpu = torch.device(device).type == "cuda"
    # 2 GiB of records on a GPU, 64 MiB for --quick; a CPU (CI's smoke run) gets 16 MiB
    n = ((1 << 20) if quick else (32 << 20)) if on_gpu else (1 << 18)
    g = torch.Generator(device=device).manual_seed(seed)
    records = torch.randn(n, FIELDS, device=device, generator=g)  # AoS: one row per particle
    fields = records.t().contiguous()                             # SoA: one row per field, same values
    return Workload(inputs={"records": records, "fields": fields}, flops=2.0 * n, bytes_moved=12.0 * n, items=n,
                    item_name="particles", derived={"fields": lambda inputs: inputs["records"].t()})


def prepare(w: Workload):
    records = w.inputs["records"]
    return lambda: torch.add(records[:, X], records[:, VX], alpha=DT)  # x + dt * vx from two strided columns


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
