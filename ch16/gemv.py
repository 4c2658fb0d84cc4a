#!/usr/bin/env python3
"""A matrix-vector product at batch 1 in Triton, and how close it and cuBLAS come to the copy rate.

    python ch16/gemv.py [--out FILE.json]      (needs a CUDA GPU and Triton)

At batch 1 a linear layer y = x Wᵀ reads every weight once and does 2 FLOPs per weight: it is a copy of
W through the SMs, so its ceiling is the copy bandwidth. cuBLAS runs it as a GEMM with M=1, and the decode
step's profile puts those kernels under the copy rate. `gemv(x, w)` is the plain design: each program
owns BLOCK_N rows of W (contiguous in K, as nn.Linear stores them), streams them in BLOCK_K chunks,
multiplies by x in fp32 and reduces each row; with SPLIT_K > 1, K is cut into SPLIT_K parts whose partial
sums are added atomically into an fp32 output (more programs for short, wide matrices).

The benchmark times both at the decode step's shapes (llama-1b: fused QKV, attention output, fused
gate/up, down, LM head) with the weights rotated through more copies than the L2 cache holds, as a step
that reads 1.6 GB of weights sees them, the calls replayed from a CUDA graph as a compiled step runs
them, and every Triton configuration of a small grid; it reports GB/s
per shape against the measured copy rate, and checks each Triton configuration's result against an fp32
product (a configuration that misses 1e-2 is listed as failed, not timed).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ch16.decode import gpu_copy_rate  # noqa: E402

try:
    import triton
    import triton.language as tl
except ImportError:  # the module imports without Triton; gemv() then raises
    triton = None

SHAPES = {"wqkv": (3072, 2048), "wo": (2048, 2048), "w13": (11264, 2048), "w2": (2048, 5632),
          "lm_head": (32000, 2048)}   # (N out, K in) at llama-1b
CONFIGS = [dict(BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=sk, num_warps=nw)
           for bn in (4, 8, 16) for bk in (256, 512) for sk in (1, 4) for nw in (4, 8)]

if triton is not None:
    @triton.jit
    def _gemv_kernel(x_ptr, w_ptr, y_ptr, N, K, stride_wn,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
        pid_n = tl.program_id(0)
        pid_k = tl.program_id(1)
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < N
        k_span = tl.cdiv(K, SPLIT_K * BLOCK_K) * BLOCK_K      # each split's share of K, whole chunks
        acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        for k0 in range(pid_k * k_span, tl.minimum((pid_k + 1) * k_span, K), BLOCK_K):
            cols = k0 + tl.arange(0, BLOCK_K)
            col_ok = cols < K
            x = tl.load(x_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + rows[:, None] * stride_wn + cols[None, :],
                        mask=row_ok[:, None] & col_ok[None, :], other=0.0, eviction_policy="evict_first")
            acc += w.to(tl.float32) * x[None, :]
        y = tl.sum(acc, axis=1)
        if SPLIT_K == 1:
            tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=row_ok)
        else:
            tl.atomic_add(y_ptr + rows, y, mask=row_ok)


def gemv(x: torch.Tensor, w: torch.Tensor, BLOCK_N=4, BLOCK_K=512, SPLIT_K=1, num_warps=4) -> torch.Tensor:
    """x (K,) or (1, K), w (N, K) contiguous in K -> x @ w.T, shape (N,) or (1, N), in x's dtype."""
    if triton is None:
        raise RuntimeError("gemv needs Triton")
    N, K = w.shape
    xv = x.reshape(-1).contiguous()
    assert xv.numel() == K and w.stride(1) == 1, (x.shape, w.shape, w.stride())
    y = torch.empty(N, device=w.device, dtype=x.dtype) if SPLIT_K == 1 else \
        torch.zeros(N, device=w.device, dtype=torch.float32)
    grid = (triton.cdiv(N, BLOCK_N), SPLIT_K)
    _gemv_kernel[grid](xv, w, y, N, K, w.stride(0), BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, SPLIT_K=SPLIT_K,
                       num_warps=num_warps)
    y = y.to(x.dtype)
    return y.view(*x.shape[:-1], N)


# The configuration a step uses (in a compiled step the op's launch is part of the CUDA graph): the fastest
# of the grid for the two largest matrices (w13, LM head) on the H100
# (profiles/h100/ch16-decode-8ca5edf/gemv.json).
STEP_CONFIG = dict(BLOCK_N=4, BLOCK_K=512, num_warps=4)

if triton is not None:
    @torch.library.triton_op("ch16::gemv", mutates_args={})
    def _gemv_op(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """x (K,) contiguous, w (N, K) -> (N,): one launch, no split-K, so torch.compile sees one kernel."""
        N, K = w.shape
        y = torch.empty(N, device=w.device, dtype=x.dtype)
        cfg = STEP_CONFIG
        grid = (triton.cdiv(N, cfg["BLOCK_N"]), 1)
        torch.library.wrap_triton(_gemv_kernel)[grid](x, w, y, N, K, w.stride(0), BLOCK_N=cfg["BLOCK_N"],
                                                      BLOCK_K=cfg["BLOCK_K"], SPLIT_K=1,
                                                      num_warps=cfg["num_warps"])
        return y


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """F.linear(x, w) without bias; one row (a decode step at batch 1) goes to the Triton kernel."""
    if triton is None or x.numel() != x.shape[-1] or not x.is_cuda:
        return torch.nn.functional.linear(x, w)
    return _gemv_op(x.reshape(-1).contiguous(), w).view(*x.shape[:-1], w.shape[0])


def rotated_ms(fn, weights, x, calls=64, replays=5) -> float:
    """GPU ms per call of fn(x, w), w taken in turn from `weights` (more bytes than L2 holds).

    The calls are captured in one CUDA graph and replayed, so the figure is the kernels' time, not the
    host's (launched one by one from Python, a call of a few µs of GPU work waits on ~20 µs of host)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for w in weights[:3]:
            fn(x, w)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(x, weights[i % len(weights)])
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / (calls * replays)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", help="write the measurements as JSON here")
    ap.add_argument("--copy-gbps", type=float, default=None, help="the copy rate to compare with "
                    "(default: this GPU's measured ceiling, from `python benchmark.py --peaks`)")
    a = ap.parse_args(argv)
    gbps, error = gpu_copy_rate("ch16/gemv.py", a.copy_gbps)
    if error or triton is None:
        print(error or "error: ch16/gemv.py needs Triton (pip install triton)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "copy_gbps": gbps, "shapes": {}}
    for name, (N, K) in SHAPES.items():
        nbytes = N * K * 2
        copies = max(2, -(-512 * 2**20 // nbytes))        # >= 512 MiB of weights in turn: ten times L2
        weights = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K**0.5 for _ in range(copies)]
        x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
        exact = (x.float() @ weights[0].float().T)
        row = {"N": N, "K": K, "MB": nbytes / 1e6}
        ms = rotated_ms(lambda x, w: torch.nn.functional.linear(x, w), weights, x)
        row["cublas"] = {"ms": ms, "gbps": nbytes / ms / 1e6}
        best = None
        for cfg in CONFIGS:
            out = gemv(x, weights[0], **cfg).float()
            err = float((out - exact).norm() / exact.norm())
            if not err < 1e-2:
                row.setdefault("failed", []).append({**cfg, "rel_err": err})
                continue
            ms = rotated_ms(lambda x, w, cfg=cfg: gemv(x, w, **cfg), weights, x)
            if best is None or ms < best["ms"]:
                best = {"ms": ms, "gbps": nbytes / ms / 1e6, "rel_err": err, **cfg}
        row["triton_best"] = best
        doc["shapes"][name] = row
        tri = f"{best['gbps']:7.0f} GB/s ({100 * best['gbps'] / gbps:4.1f}%) {best}" if best else "none verified"
        print(f"{name:8s} {N:6d}x{K:<5d} cuBLAS {row['cublas']['gbps']:7.0f} GB/s "
              f"({100 * row['cublas']['gbps'] / gbps:4.1f}%)  Triton {tri}", flush=True)
        del weights
        torch.cuda.empty_cache()
    if a.out:
        Path(a.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
