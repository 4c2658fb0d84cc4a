"""Weight-only float8 that is faster than bf16: e4m3 weights, one scale per output row, widened in registers.

At decode sizes (a few to a few dozen tokens) a linear layer's time is its weight bytes over the copy rate:
the FLOPs are a rounding error. Float8 (e4m3) weights are half of bf16's bytes, so the layer can take half
the time, on one condition: the 1-byte weights must be widened *in registers*, inside the product, and
never written back to memory as bf16 (torchao's Float8WeightOnlyConfig does write them back, which is why
it is slower than bf16: ch13/optimized_fp8_linear_weight_only.py). This file is that kernel, and the one
place the repository defines the format:

- `quantize_rows(w)`: per output row, the largest |w| maps to e4m3's largest value (448); one fp32 scale per
  row, so one row's outliers cost no other row precision. Done once, where the weights are loaded.
- `weight_tile` and `row_scales`: how a kernel reads the format. A tile of weight rows is loaded (1 byte
  each, marked evict-first: each is read once per call), converted in registers, and the row's scale
  multiplies the row's *sum*, not each weight: y[n] = scale[n] * sum_k w8[n, k] x[k]. Chapter 16's
  decode step (ch16/pdl_step.py) reads its float8 weights with these two functions.
- `fp8_linear(x, w8, scale, bias, gelu)`: y = x @ (w8 * scale).T + bias for M tokens, the product a
  Triton tl.dot on a tile of BLOCK_N weight rows by all the tokens (M padded to 16, tl.dot's smallest).
  By default the weight tile is the dot's first operand, so the tokens are its narrow dimension
  (the "swap AB" of decode kernels: a 64-row MMA over weight rows, 32-64 columns of tokens); for chapter 13's
  MLP shapes up to 16 tokens the tokens are the first operand, as in a plain GEMM, which the H100 sweep
  measured faster there (SWAP in BLOCKS; profiles/h100/ch13-fp8-eeb9e9f/fp8_weight_only_sweep.md).
  Where K is long and N short (a down projection) the K range is split over SPLIT_K programs, each writing fp32 partial sums; the
  last of a tile's programs to finish (an atomic count per tile) adds them, adds the bias and rounds, so
  a call stays one launch. Without the split the grid is a fraction of the 132 SMs.
  Up to 64 tokens the weights are read once a call; more tokens are tiled by 64, each tile reading them.
- `FP8Linear(..., pdl="first" | "second")`: two layers in a row with programmatic dependent launch (Hopper):
  the second launches while the first runs and waits on the GPU for its output, so its launch and set-up
  overlap the first one's tail (ch13/optimized_fp8_linear_triton.py, with the figures).

Where eager rounds, this rounds: the product with its bias to the activation dtype, then the GELU's
output. Run it as a script for the block sizes per shape and the speed against cuBLAS bf16:
`python ch13/fp8_weight_only.py --help`.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import pathlib

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))   # run as a script: the repository's root

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None
try:
    from triton.tools.tensor_descriptor import TensorDescriptor   # host-made TMA descriptors (Triton >= 3.4)
except ImportError:
    TensorDescriptor = None
if triton is not None:
    from ch13.triton_kernels import bound_launch, gelu_tanh

E4M3 = torch.float8_e4m3fn
# (BLOCK_N, BLOCK_K, SPLIT_K, warps, stages[, TMA, SWAP]) by (N, K, tokens up to 16 or 64): the best of this
# script's sweep on the H100 (profiles/h100/ch13-fp8-eeb9e9f/fp8_weight_only_sweep.md) among plain loads (TMA saved
# kernel time at 64 tokens, but its descriptors, encoded on the host at every launch, cost the up projection more
# than that: profiles/h100/ch13-fp8-8a9b340); other shapes get pick_blocks' heuristic (SWAP, any token count)
BLOCKS = {(14336, 4096, 64): (64, 128, 1, 4, 4), (4096, 14336, 64): (64, 128, 4, 4, 4),
          (14336, 4096, 16): (64, 256, 1, 4, 4, False, False), (4096, 14336, 16): (64, 256, 2, 8, 4, False, False)}


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(float8 e4m3 weight, fp32 scale per row) with w ≈ w8 * scale[:, None]: each row's largest |w| maps to
    e4m3's largest value, 448 (per-output-channel scaling: one row's outliers cost no other row precision)."""
    wf = w.float()
    scale = wf.abs().amax(dim=1).clamp_min(1e-12) / torch.finfo(E4M3).max
    return (wf / scale[:, None]).to(E4M3).contiguous(), scale.contiguous()


if triton is not None:
    @triton.jit
    def weight_tile(w_ptr, rows, cols, K, EVEN_K: tl.constexpr = False):
        """W[rows, cols] of a row-major (N, K) weight, as stored (float8 or not); columns past K read 0 unless
        EVEN_K (the caller's tiles divide K: no mask).
        Evict-first: a call reads each weight once, so it should not push reused data out of L2."""
        if EVEN_K:
            return tl.load(w_ptr + rows[:, None] * K + cols[None, :], eviction_policy="evict_first")
        else:
            return tl.load(w_ptr + rows[:, None] * K + cols[None, :], mask=cols[None, :] < K, other=0.0,
                           eviction_policy="evict_first")

    @triton.jit
    def row_scales(scale_ptr, rows, FP8: tl.constexpr):
        """Each row's fp32 scale (FP8), or 1.0 for weights stored in the activation's type."""
        if FP8:
            return tl.load(scale_ptr + rows)
        else:
            return 1.0

    @triton.jit
    def _finish(acc, rows, toks, M, N, bias_ptr, out_ptr, HAS_BIAS: tl.constexpr, GELU: tl.constexpr):
        """acc (BLOCK_N rows of W, BLOCK_M tokens), scaled: + bias, rounded, GELU, stored to out (M, N)."""
        if HAS_BIAS:
            acc = acc + tl.load(bias_ptr + rows).to(tl.float32)[:, None]
        y = acc.to(out_ptr.dtype.element_ty)                    # eager rounds the product with its bias
        if GELU:
            y = gelu_tanh(y.to(tl.float32)).to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + toks[None, :] * N + rows[:, None], y, mask=toks[None, :] < M)

    @triton.jit
    def _fp8_linear_kernel(x_ptr, w_ptr, scale_ptr, bias_ptr, out_ptr, part_ptr, count_ptr, M, N, K, K_PER_SPLIT,
                           x_desc, w_desc, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                           SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr, GELU: tl.constexpr, TMA: tl.constexpr,
                           SWAP: tl.constexpr = True, LAUNCH_NEXT: tl.constexpr = False,
                           WAIT_PREV: tl.constexpr = False):
        """One program: BLOCK_N output features x BLOCK_M tokens over its share of K. W is float8 (N, K) with
        a scale per row; x (M, K) and out (M, N) in the activation's type. SPLIT_K > 1: part (SPLIT_K, M, N)
        fp32 partial sums and count (one int32 per output tile, zero between calls): the last program of a
        tile to finish adds the partial sums and writes the tile. TMA: the tiles of W and x come through the
        Hopper copy engine (tensor descriptors w_desc, x_desc: one instruction per tile, no addresses computed
        per thread; x's rows past M read as zeros) instead of per-thread loads. SWAP (the default): the weight
        tile is the dot's first operand (tokens the narrow dimension); else x is, as in a plain GEMM.
        Programmatic dependent launch (two layers in a row, the second launched with launch_pdl): the first
        layer's programs let the next kernel launch at once (LAUNCH_NEXT); the second's programs start on
        the SMs the first leaves room on and wait there for its output (WAIT_PREV) before their loop, so
        the launch and the programs' set-up overlap the first layer's tail instead of following it."""
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        toks = tl.program_id(2) * BLOCK_M + tl.arange(0, BLOCK_M)
        k0 = tl.program_id(1) * K_PER_SPLIT
        if LAUNCH_NEXT:
            tl.extra.cuda.gdc_launch_dependents()
        if WAIT_PREV:
            tl.extra.cuda.gdc_wait()         # the previous kernel's writes (x) are complete and visible
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        acc_t = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)     # not SWAP: the same sums, transposed
        for k in range(k0, k0 + K_PER_SPLIT, BLOCK_K):
            cols = k + tl.arange(0, BLOCK_K)
            if TMA:
                w = w_desc.load([tl.program_id(0) * BLOCK_N, k])
                xt = x_desc.load([tl.program_id(2) * BLOCK_M, k]).T
            else:
                w = weight_tile(w_ptr, rows, cols, K, True)                         # (BLOCK_N, BLOCK_K) e4m3
                xt = tl.load(x_ptr + toks[None, :] * K + cols[:, None], mask=toks[None, :] < M, other=0.0)
            if SWAP:
                acc = tl.dot(w.to(xt.dtype), xt, acc)                               # widened in registers
            else:
                acc_t = tl.dot(tl.trans(xt), tl.trans(w.to(xt.dtype)), acc_t)
        if not SWAP:
            acc = tl.trans(acc_t)
        acc = acc * row_scales(scale_ptr, rows, True)[:, None]
        if SPLIT_K == 1:
            _finish(acc, rows, toks, M, N, bias_ptr, out_ptr, HAS_BIAS, GELU)
        else:
            tile = toks[None, :] * N + rows[:, None]
            tl.store(part_ptr + tl.program_id(1) * M * N + tile, acc, mask=toks[None, :] < M)
            tl.debug_barrier()                       # every thread's partial sums stored before the count
            counter = count_ptr + tl.program_id(0) * tl.num_programs(2) + tl.program_id(2)
            if tl.atomic_add(counter, 1, sem="acq_rel") == SPLIT_K - 1:   # the tile's last program
                total = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
                for s in range(SPLIT_K):             # from L2 (.cg): the other programs ran on other SMs
                    total += tl.load(part_ptr + s * M * N + tile, mask=toks[None, :] < M, other=0.0,
                                     cache_modifier=".cg")
                _finish(total, rows, toks, M, N, bias_ptr, out_ptr, HAS_BIAS, GELU)
                tl.atomic_xchg(counter, 0)           # zero again for the next call


def pick_blocks(M: int, N: int, K: int) -> tuple:
    """(BLOCK_N, BLOCK_K, SPLIT_K, warps, stages[, TMA, SWAP]) for a product of M tokens by an (N, K) weight. The measured
    table first; otherwise 64-row tiles, and K split until the grid has 192 programs or more (the sweep's
    best: 224 programs unsplit, 64 split four ways)."""
    tokens = 16 if M <= 16 else 64
    if (N, K, tokens) in BLOCKS and M <= 64:
        return BLOCKS[(N, K, tokens)]
    block_n = 64 if N % 64 == 0 else 16
    block_k = 128
    while K % block_k and block_k > 16:      # the tiles must divide K (unmasked loads)
        block_k //= 2
    split = 1
    while N // block_n * split < 192 and K % (2 * split * block_k) == 0:
        split *= 2
    return block_n, block_k, split, 4, 4


def _block_m(M: int) -> int:
    """Tokens per program: all of them up to 64, at least tl.dot's 16."""
    return min(64, max(16, triton.next_power_of_2(M)))


def _launch(x, w8, scale, bias, gelu, blocks, pdl=None):
    """(out, grid, arguments, options) of one product: the output allocated, and with a split K the fp32
    partial sums and the int32 counts per output tile (zeros); with none, out stands in for both.
    pdl: None, "first" (let the next kernel launch early) or "second" (launched early, waits for the
    previous kernel's output): programmatic dependent launch, see _fp8_linear_kernel."""
    M, K = x.shape
    N = w8.shape[0]
    block_n, block_k, split, warps, stages, *more = blocks
    tma, swap = (list(more) + [False, True][len(more):])[:2]
    assert w8.dtype == E4M3 and w8.shape[1] == K and x.is_contiguous() and w8.is_contiguous()
    assert N % block_n == 0 and K % (split * block_k) == 0, ("N, K must divide the tiles", N, K, blocks)
    assert pdl in (None, "first", "second"), pdl
    block_m = _block_m(M)
    grid = (N // block_n, split, triton.cdiv(M, block_m))
    out = part = counts = torch.empty(M, N, device=x.device, dtype=x.dtype)
    if split > 1:
        part = torch.empty(split, M, N, device=x.device, dtype=torch.float32)
        counts = torch.zeros(grid[0] * grid[2], device=x.device, dtype=torch.int32)
    b = bias if bias is not None else scale          # any pointer: HAS_BIAS=False never reads it
    x_desc = w_desc = None
    if tma:
        if TensorDescriptor is None:
            raise RuntimeError("TMA blocks need triton.tools.tensor_descriptor (Triton >= 3.4)")
        x_desc = TensorDescriptor.from_tensor(x, [block_m, block_k])    # rows past M: zeros
        w_desc = TensorDescriptor.from_tensor(w8, [block_n, block_k])
    return (out, grid, dict(x_ptr=x, w_ptr=w8, scale_ptr=scale, bias_ptr=b, out_ptr=out, part_ptr=part,
                            count_ptr=counts, M=M, N=N, K=K, K_PER_SPLIT=K // split, x_desc=x_desc, w_desc=w_desc,
                            BLOCK_N=block_n, BLOCK_M=block_m, BLOCK_K=block_k, SPLIT_K=split,
                            HAS_BIAS=bias is not None, GELU=gelu, TMA=bool(tma),
                            SWAP=bool(swap), LAUNCH_NEXT=pdl == "first", WAIT_PREV=pdl == "second"),
            dict(num_warps=warps, num_stages=stages, **({"launch_pdl": True} if pdl == "second" else {})))


def fp8_linear(x: torch.Tensor, w8: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None,
               gelu: bool = False, blocks: tuple | None = None) -> torch.Tensor:
    """y = x @ (w8 * scale[:, None]).T (+ bias) (then tanh-GELU), in x's dtype: x (M, K), w8 (N, K) e4m3.
    Launched through Triton's JIT, which binds and checks the arguments on every call (see FP8Linear)."""
    if triton is None:
        raise RuntimeError("fp8_linear needs Triton")
    out, grid, args, options = _launch(x, w8, scale, bias, gelu,
                                       blocks or pick_blocks(x.shape[0], w8.shape[0], x.shape[1]))
    _fp8_linear_kernel[grid](**args, **options)
    return out


class FP8Linear:
    """fp8_linear for one input buffer, set up once: the blocks picked, the output (and split-K partial sums)
    allocated, the kernel compiled, and every call relaunched through the compiled kernel's own launcher
    with the arguments bound in advance. A layer of a decode loop reads its input from the same buffer every
    step, and Triton's JIT launch (binding, type-checking and hashing a dozen arguments in Python on every
    call) costs more host time than these kernels take on the GPU: the H100 figures are in the sweep's
    "launched one by one" column. Call it; it returns the same output tensor, rewritten. pdl: None, or
    "first" and "second" for two layers in a row launched with programmatic dependent launch (_launch)."""

    def __init__(self, x, w8, scale, bias=None, gelu=False, blocks=None, pdl=None):
        if triton is None:
            raise RuntimeError("FP8Linear needs Triton")
        self.out, grid, args, options = _launch(x, w8, scale, bias, gelu,
                                                blocks or pick_blocks(x.shape[0], w8.shape[0], x.shape[1]),
                                                pdl)
        self.run = bound_launch(_fp8_linear_kernel, grid, (), args, options)   # compiles, runs once

    def __call__(self) -> torch.Tensor:
        self.run()
        return self.out


# --- the sweep: block sizes per shape, against cuBLAS bf16, weights rotated over copies larger than L2 ---

def candidates(M: int, N: int, K: int, block_ns=(32, 64, 128, 256), block_ks=(128, 256), tmas=(False, True),
               splits=(1, 2, 4, 8, 16), warps_stages=((4, 3), (4, 4), (4, 5), (8, 3), (8, 4), (8, 5)), swaps=(True,)):
    """Block sizes that divide the shape, give the grid 48-2048 programs and fit shared memory (the pipeline
    holds `stages` tiles of weights and of x), with per-thread loads and with TMA (tmas)."""
    block_m = _block_m(M)
    for block_n, block_k, split, (warps, stages), tma, swap in itertools.product(
            block_ns, block_ks, splits, warps_stages, tmas, swaps):
        if N % block_n or K % (split * block_k) or not 48 <= N // block_n * split <= 2048:
            continue
        if stages * (block_n * block_k + 2 * block_m * block_k) > 200 * 1024:
            continue
        if tma and TensorDescriptor is None:
            continue
        yield (block_n, block_k, split, warps, stages) + ((tma, swap) if not swap else (True,) if tma else ())


def sweep(shapes, tokens, out_md: pathlib.Path | None, **space):
    from ch13.sweep import graph_time_ms   # a CUDA graph of calls, timed by events
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    lines = ["| tokens | N x K | cuBLAS bf16 ms | fp8 ms | speedup | fp8 bytes GB/s | blocks (BLOCK_N, BLOCK_K, "
             "SPLIT_K, warps, stages[, TMA, SWAP]) | launched one by one: bf16, fp8 (JIT), fp8 (FP8Linear) ms | rel. error vs bf16 |",
             "| ---: | --- | ---: | ---: | ---: | ---: | --- | --- | ---: |"]
    for N, K in shapes:
        copies = max(4, -(-3 * l2 // (N * K)))      # every call reads weights that are not in L2
        g = torch.Generator(device=dev).manual_seed(0)
        ws = [(torch.randn(N, K, device=dev, generator=g) / K ** 0.5).to(torch.bfloat16) for _ in range(copies)]
        qs = [quantize_rows(w) for w in ws]
        for M in tokens:
            x = torch.randn(M, K, device=dev, generator=g).to(torch.bfloat16)
            base, base_host = graph_time_ms(lambda i: torch.nn.functional.linear(x, ws[i]), copies)
            best = None
            for blocks in candidates(M, N, K, **space):   # as the pair runs them: FP8Linear, buffers allocated once
                try:
                    lins = [FP8Linear(x, *qs[i], blocks=blocks) for i in range(copies)]
                    ms, bound = graph_time_ms(lambda i: lins[i](), copies)
                except Exception as e:  # a tile that does not fit (shared memory): skip it, say so
                    print(f"  {M} x {N} x {K} {blocks}: {type(e).__name__}", file=sys.stderr)
                    continue
                print(f"  {M} x {N} x {K} {blocks}: {ms:.4f} ms (one by one {bound:.4f})", file=sys.stderr, flush=True)
                if best is None or ms < best[0]:
                    best = (ms, bound, blocks)
            ms, bound, blocks = best
            _, host = graph_time_ms(lambda i: fp8_linear(x, *qs[i], blocks=blocks), copies)
            ref = torch.nn.functional.linear(x, ws[0]).float()
            err = float(((fp8_linear(x, *qs[0], blocks=blocks).float() - ref).norm() / ref.norm()))
            gbs = (N * K + 4 * N + 2 * M * (K + N)) / ms / 1e6
            lines.append(f"| {M} | {N} x {K} | {base:.4f} | {ms:.4f} | {base / ms:.2f}x | {gbs:.0f} | {blocks} | "
                         f"{base_host:.4f}, {host:.4f}, {bound:.4f} | {err:.1e} |")
            print(lines[-1], flush=True)
        del ws, qs
    from common.cli import git_commit
    commit = git_commit()
    text = (f"# Weight-only float8 (ch13/fp8_weight_only.py) against cuBLAS bf16 F.linear\n\n"
            f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}, Triton {triton.__version__}, commit "
            f"`{commit}`. Per call: "
            f"the median of 30 replays of a CUDA graph of calls over weight copies larger than 3x L2 together (the "
            f"kernels' time; the fp8 ones as FP8Linear objects, buffers allocated once); beside it, the same calls "
            f"launched one by one (with the host's launch cost), the fp8 ones through Triton's JIT (fp8_linear, "
            f"which allocates its buffers every call) and through the compiled kernels (FP8Linear). The best "
            f"per shape of the block sizes `candidates` yields for it.\n\n" + "\n".join(lines) + "\n")
    if out_md:
        out_md.write_text(text)
    print(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] + " Sweeps the block sizes per shape (GPU only) "
                                 "and prints each shape's best against cuBLAS bf16.")
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 16, 64], help="rows of x (default 1 16 64)")
    ap.add_argument("--shape", nargs="+", default=["14336x4096", "4096x14336", "16384x4096", "4096x16384"],
                    help="weights as NxK (out x in); default: chapter 13's MLP and the issue's probe shapes")
    ap.add_argument("--output", type=pathlib.Path, help="also write the table to this Markdown file")
    ap.add_argument("--block-n", type=int, nargs="+", default=[32, 64, 128, 256], help="BLOCK_N values to try")
    ap.add_argument("--block-k", type=int, nargs="+", default=[128, 256], help="BLOCK_K values to try")
    ap.add_argument("--tma", choices=("off", "on", "both"), default="both",
                    help="weight and activation tiles by per-thread loads (off), by TMA (on), or both (default)")
    ap.add_argument("--swap", choices=("on", "off", "both"), default="both",
                    help="the weight tile as the dot's first operand (on), the tokens (off), or both (default)")
    a = ap.parse_args(argv)
    try:
        shapes = [tuple(int(v) for v in s.lower().split("x")) for s in a.shape]
    except ValueError:
        ap.error(f"--shape takes NxK, e.g. 4096x14336: {a.shape}")
    if triton is None or not torch.cuda.is_available():
        print("error: the sweep needs a CUDA GPU and Triton" + ("" if triton else " (Triton is not installed)"),
              file=sys.stderr)
        return 2
    sweep(shapes, a.tokens, a.output, block_ns=a.block_n, block_ks=a.block_k,
          tmas={"off": (False,), "on": (True,), "both": (False, True)}[a.tma],
          swaps={"on": (True,), "off": (False,), "both": (True, False)}[a.swap])
    return 0


if __name__ == "__main__":
    sys.exit(main())
