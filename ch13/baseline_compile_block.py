"""One transformer block's forward (inference), eager: every LayerNorm, bias, GELU and residual its own kernel.

Workload (GPU): ch13/block.py's block (d=2048, 16 heads, MLP 8192), batch 4 x 2048 tokens, bf16, under
torch.no_grad. On a CPU and --quick: the tiny block (d=64), fp32.

Prepared once: the weights. Per call: the input x.

Bound: compute. Napkin math: 0.89 TFLOP per forward ≈ 1.4 ms at ~650 TFLOP/s. Eager adds the element-wise
passes the matmuls do not fuse: 2 LayerNorms, 2 bias adds that cuBLAS does fuse (addmm), the GELU and two
residual adds each read and write 8192 x 2048 (or x 8192 for the GELU) bf16 values: ~10 passes of 32-128 MiB
≈ 0.6 GB ≈ 0.2 ms at 3 TB/s, plus ~20 launches.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.block import SIZES, build_blocks, random_input, step_dtype
from common import Workload

BOUND = "compute"


def workload(seed: int, device, quick: bool = False) -> Workload:
    cfg = SIZES["h100"] if torch.device(device).type == "cuda" and not quick else SIZES["tiny"]
    dtype = step_dtype(device)
    model = build_blocks(cfg, device, dtype, seed=0).eval()
    x = random_input(cfg, device, dtype, seed)
    return Workload(inputs={"x": x, "model": model}, flops=cfg.forward_flops(),
                    bytes_moved=x.element_size() * (cfg.params_per_block() + 2 * x.numel()),
                    items=cfg.batch * cfg.seq, item_name="tokens")


def forward(model, x):
    with torch.no_grad():
        return model(x)


def prepare(w: Workload):
    x, model = w.inputs["x"], w.inputs["model"]
    return lambda: forward(model, x)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
