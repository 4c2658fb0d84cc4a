"""Row softmax written as the PyTorch ops it is made of: max, subtract, exp, sum, divide.

Workload (GPU): 32768 rows x 4096 columns, bf16 (256 MiB). On a CPU and --quick: 256 x 1000, fp32
(1000 columns: not a power of two, so a kernel's masking is exercised). A sweep sets the columns and the
dtype (`benchmark.py --pair softmax --sizes 1024 4096 16384 --dtypes float32 bfloat16`); the rows stay.

Per call: x. Nothing is prepared once.

Bound: memory. Napkin math: each op is a kernel and a pass over the data: max reads x (1), x - max reads
and writes (2), exp reads and writes (2), sum reads (1), divide reads and writes (2): 8 passes of 256 MiB
= 2 GiB ≈ 0.72 ms at ~3 TB/s, where one fused pass (read x, write y) is 512 MiB ≈ 0.18 ms: the fused
kernel can be up to 4x faster (the Triton tutorial's 02-fused-softmax counts the same way).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "memory"
SWEEP = {"size": "columns per row", "dtype": ("float32", "bfloat16", "float16")}


def workload(seed: int, device, quick: bool = False, size: int | None = None, dtype: str | None = None) -> Workload:
    on_gpu = torch.device(device).type == "cuda"
    rows, cols = (32768, 4096) if on_gpu and not quick else (256, 1000)
    cols = size or cols
    dtype = getattr(torch, dtype) if dtype else torch.bfloat16 if on_gpu else torch.float32
    g = torch.Generator(device=device).manual_seed(seed)
    x = (3 * torch.randn(rows, cols, device=device, generator=g)).to(dtype)
    return Workload(inputs={"x": x}, flops=5.0 * rows * cols, bytes_moved=2.0 * x.numel() * x.element_size(),
                    items=rows, item_name="rows")


def naive_softmax(x):
    z = x - x.max(dim=1, keepdim=True).values
    e = torch.exp(z)
    return e / e.sum(dim=1, keepdim=True)


def prepare(w: Workload):
    x = w.inputs["x"]
    return lambda: naive_softmax(x)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
