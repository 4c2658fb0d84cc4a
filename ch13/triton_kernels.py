"""The chapter's Triton kernels: a fused row softmax, a GEMM with an optional bias + GELU epilogue
(autotuned over a stated set of tile configurations), and its persistent form.

Imported by the Triton variants; importing it without Triton works (TRITON is False) so that the
harness can load a variant and skip it with the reason.
"""
from __future__ import annotations

import functools
import math

import torch

try:
    import triton
    import triton.language as tl
    TRITON = True
except ImportError:  # the variants that need Triton declare REQUIRES = ("triton",)
    TRITON = False

# The autotuner's search space, stated: (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps). Large tiles
# reuse each loaded element more (for each k a BM x BN tile loads BM + BN elements and does 2*BM*BN FLOPs:
# in bf16 ~85 FLOPs per byte at 128 x 256, 32 at 64 x 64) but hold more accumulator registers and shared
# memory per stage; small tiles make more programs, which fills 132 SMs at small M, N. Stages pipeline the
# K loop's loads (cp.async / TMA) behind the MMAs.
GEMM_CONFIGS = [
    (128, 256, 64, 3, 8),
    (256, 128, 64, 3, 8),
    (128, 128, 64, 4, 4),
    (128, 128, 64, 4, 8),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 64, 64, 5, 4),
    (128, 128, 128, 3, 8),
]
GROUP_M = 8  # grouped tile order: 8 row-tiles share their column tiles in L2 (the tutorial's "super-grouping")
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

if TRITON:
    @triton.jit
    def softmax_kernel(x_ptr, y_ptr, x_stride, y_stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        inside = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=inside, other=0.0).to(tl.float32)
        x = tl.where(inside, x, float("-inf"))  # columns past the end: out of the max, exp(-inf) = 0 in the sum
        z = x - tl.max(x, axis=0)
        e = tl.exp(z)
        y = e / tl.sum(e, axis=0)
        tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=inside)

    @triton.jit
    def gelu_tanh(x):
        """nn.GELU(approximate="tanh"): 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)."""
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        return x * tl.sigmoid(2.0 * u)

    @triton.jit
    def _epilogue(acc, b_ptr, offs_n, N, HAS_BIAS: tl.constexpr, GELU: tl.constexpr):
        if HAS_BIAS:
            acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
        if GELU:
            acc = gelu_tanh(acc)
        return acc

    @triton.jit
    def _tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP: tl.constexpr):
        num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
        width = GROUP * num_n
        first_m = (pid // width) * GROUP
        group_rows = min(num_m - first_m, GROUP)
        return first_m + ((pid % width) % group_rows), (pid % width) // group_rows

    @triton.jit
    def _tile_sum(a_ptr, w_ptr, tile, k_lo, k_hi, M, N, K, sam, sak, swk, swn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr):
        """One output tile's fp32 sum over K steps k_lo..k_hi-1 (tl.dot on BLOCK_K slices), with its offsets."""
        pid_m, pid_n = _tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_lo, k_hi):
            kk = k * BLOCK_K + offs_k
            a = tl.load(a_ptr + offs_m[:, None] * sam + kk[None, :] * sak,
                        mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
            w = tl.load(w_ptr + kk[:, None] * swk + offs_n[None, :] * swn,
                        mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            acc = tl.dot(a, w, acc)
        return acc, offs_m, offs_n

    @triton.jit
    def _store_tile(acc, offs_m, offs_n, b_ptr, c_ptr, M, N, scm, scn, HAS_BIAS: tl.constexpr, GELU: tl.constexpr):
        acc = _epilogue(acc, b_ptr, offs_n, N, HAS_BIAS, GELU)
        tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
                 mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

    @triton.jit
    def _gemm_kernel(a_ptr, w_ptr, b_ptr, c_ptr, M, N, K, sam, sak, swk, swn, scm, scn,
                     HAS_BIAS: tl.constexpr, GELU: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, GROUP: tl.constexpr):
        """One program per output tile: the hardware scheduler hands the tiles to the SMs, wave by wave."""
        acc, offs_m, offs_n = _tile_sum(a_ptr, w_ptr, tl.program_id(0), 0, tl.cdiv(K, BLOCK_K), M, N, K,
                                        sam, sak, swk, swn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP)
        _store_tile(acc, offs_m, offs_n, b_ptr, c_ptr, M, N, scm, scn, HAS_BIAS, GELU)

    @triton.jit
    def _persistent_gemm_kernel(a_ptr, w_ptr, b_ptr, c_ptr, part_ptr, count_ptr, M, N, K, sam, sak, swk, swn,
                                scm, scn, HAS_BIAS: tl.constexpr, GELU: tl.constexpr, BLOCK_M: tl.constexpr,
                                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr,
                                NUM_PROGRAMS: tl.constexpr, SPLIT_TAIL: tl.constexpr):
        """NUM_PROGRAMS programs (one per SM), each walking the tiles pid, pid + NUM_PROGRAMS, ...

        SPLIT_TAIL: only the full waves go that way. The tiles of the last, partial wave (tail < NUM_PROGRAMS
        of them) are each split along K over split = NUM_PROGRAMS // tail programs, so the last wave keeps
        every SM busy for 1/split of a tile instead of a few SMs for a whole tile (the data-parallel + Stream-K
        hybrid). Each of a tail tile's programs adds its K range's sums into the tile's fp32 part[t] (atomic adds,
        done in L2, zeros between calls); the last to finish (an acq_rel count per tail tile) reads the total,
        zeroes part[t] and the count for the next call, applies the epilogue and stores. The float atomics add
        in whatever order the programs finish: the split tiles' sums are not bitwise reproducible run to run."""
        pid = tl.program_id(0)
        tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        k_steps = tl.cdiv(K, BLOCK_K)
        full, split = tiles, 1                     # full: the tiles of the full waves, each done whole
        if SPLIT_TAIL:
            full = tiles - tiles % NUM_PROGRAMS
            split = NUM_PROGRAMS // tl.maximum(tiles - full, 1)
        per = tl.cdiv(k_steps, split)
        # one loop, one K loop inside (one software pipeline, one set of shared-memory buffers): work item u
        # is tile u for u < full, else the slice (u - full) % split of tail tile full + (u - full) // split
        for u in range(pid, full + (tiles - full) * split, NUM_PROGRAMS):
            tile, k_lo, k_hi = u, 0, k_steps
            if u >= full:
                tile = full + (u - full) // split
                k_lo = (u - full) % split * per
                k_hi = tl.minimum(k_steps, k_lo + per)
            acc, offs_m, offs_n = _tile_sum(a_ptr, w_ptr, tile, k_lo, k_hi, M, N, K, sam, sak, swk, swn,
                                            BLOCK_M, BLOCK_N, BLOCK_K, GROUP)
            if u < full or split == 1:             # a whole tile: stored as it is
                _store_tile(acc, offs_m, offs_n, b_ptr, c_ptr, M, N, scm, scn, HAS_BIAS, GELU)
            else:                                  # u - full < NUM_PROGRAMS: at most one such item per program
                t = (u - full) // split
                sums = part_ptr + t * BLOCK_M * BLOCK_N + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N \
                    + tl.arange(0, BLOCK_N)[None, :]
                tl.atomic_add(sums, acc, sem="relaxed")      # added in L2, by all of the tile's items at once
                tl.debug_barrier()                 # every thread's additions issued before the count
                if tl.atomic_add(count_ptr + t, 1, sem="acq_rel") == split - 1:     # the tile's last item
                    total = tl.load(sums, cache_modifier=".cg")
                    tl.store(sums, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32))  # zero for the next call
                    _store_tile(total, offs_m, offs_n, b_ptr, c_ptr, M, N, scm, scn, HAS_BIAS, GELU)
                    tl.atomic_xchg(count_ptr + t, 0)

    gemm_autotuned = triton.autotune(
        configs=[triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP": GROUP_M},
                               num_stages=s, num_warps=nw) for bm, bn, bk, s, nw in GEMM_CONFIGS],
        key=["M", "N", "K"])(_gemm_kernel)


def softmax(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    warps = 4 if block <= 1024 else 8 if block <= 8192 else 16
    softmax_kernel[(rows,)](x, out, x.stride(0), out.stride(0), cols, BLOCK=block, num_warps=warps)
    return out


def _args(x, w, b, out):
    M, K = x.shape
    N = w.shape[1]
    return (x, w, b if b is not None else out, out, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
            out.stride(0), out.stride(1)), M, N


def bound_launch(kernel, grid, args: tuple, kwargs: dict, options: dict):
    """Launch kernel once through Triton's JIT (compiling it, once per configuration), and return a callable
    that relaunches it through the compiled kernel's own launcher with these arguments bound. The JIT binds,
    type-checks and hashes every argument in Python on every call: on the H200's host 28-43 us more than the
    bound launch (scripts/launch_race_probe.py), 40-60% of a 70 us kernel (the JIT path, wrapper included). A
    loop that feeds the same tensors every step (in place) needs none of that. The CPU interpreter returns no
    compiled kernel: there, the JIT."""
    compiled = kernel[grid](*args, **kwargs, **options)
    if not (hasattr(compiled, "run") and hasattr(compiled, "__getitem__")):
        return functools.partial(kernel[grid], *args, **kwargs, **options)
    values = dict(zip(kernel.arg_names, args), **kwargs)
    values.update({p.name: p.default for p in kernel.params if p.name not in values and p.has_default})
    run, bound = compiled[tuple(grid) + (1,) * (3 - len(grid))], [values[name] for name in kernel.arg_names]
    return lambda: run(*bound)


def _returning(launch, out):
    def call():
        launch()
        return out
    return call


def _gemm_launch(x, w, b, out, gelu: bool, config):
    """(grid, arguments, constexpr arguments, options) of gemm with config=(BM, BN, BK, stages, warps)."""
    args, M, N = _args(x, w, b, out)
    bm, bn, bk, s, nw = config
    return ((triton.cdiv(M, bm) * triton.cdiv(N, bn),), args,
            dict(HAS_BIAS=b is not None, GELU=gelu, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP=GROUP_M),
            dict(num_stages=s, num_warps=nw))


def gemm_launcher(x, w, b, out, gelu: bool, config):
    """gemm with config bound to these tensors (bound_launch): call it to recompute out from their current
    values; it returns out. One configuration, not the autotuner's choice per call."""
    if config is None:
        raise ValueError("gemm_launcher binds one configuration (BM, BN, BK, stages, warps); config=None autotunes "
                         "per call: use gemm")
    return _returning(bound_launch(_gemm_kernel, *_gemm_launch(x, w, b, out, gelu, config)), out)


def gemm(x, w, b, out, gelu: bool, config=None):
    """out = [gelu](x @ w [+ b]); autotuned over GEMM_CONFIGS unless config=(BM, BN, BK, stages, warps)."""
    if config is None:
        args, M, N = _args(x, w, b, out)
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
        gemm_autotuned[grid](*args, HAS_BIAS=b is not None, GELU=gelu)
    else:
        grid, args, kwargs, options = _gemm_launch(x, w, b, out, gelu, config)
        _gemm_kernel[grid](*args, **kwargs, **options)
    return out


def best_config() -> dict:
    """The configuration the autotuner chose for each key it has seen ((M, N, K), then the dtypes in newer Triton)."""
    return {str(k): str(v) for k, v in getattr(gemm_autotuned, "cache", {}).items()}


def picked(m: int, n: int, k: int) -> str:
    """The autotuner's choice for one shape, or "" before it has tuned that shape."""
    for key, cfg in getattr(gemm_autotuned, "cache", {}).items():
        if tuple(key[:3]) == (m, n, k):
            return str(cfg)
    return ""


class PersistentGemm:
    """gemm's product and epilogue from a persistent grid, each program looping over its tiles. Without
    split_tail: min(num_programs, tiles) programs, every tile whole. With it: num_programs programs, and the
    tiles of the last partial wave (all of them, where there are fewer tiles than programs) split along K
    over all the programs; where the tiles fill whole waves there is nothing to split and the kernel is
    launched without the split's code. Set up once per output (the split's fp32 tile sums and its counts
    per tile, zeros between calls); call it with x, w, b."""

    def __init__(self, out, config, num_programs: int, split_tail: bool = True):
        self.out, self.config = out, config
        n_tiles = tiles(out.shape[0], out.shape[1], config)
        self.split_tail = split_tail and n_tiles % num_programs != 0
        self.programs = num_programs if self.split_tail else min(num_programs, n_tiles)
        bm, bn = config[0], config[1]
        self.part = torch.zeros(self.programs if self.split_tail else 1, bm, bn, device=out.device,
                                dtype=torch.float32)
        self.counts = torch.zeros(self.programs, device=out.device, dtype=torch.int32)

    def _launch(self, x, w, b, gelu):
        assert (x.shape[0], w.shape[1]) == tuple(self.out.shape) and x.shape[1] == w.shape[0], \
            ("x @ w must have the output's shape", tuple(x.shape), tuple(w.shape), tuple(self.out.shape))
        (xa, wa, ba, out, M, N, K, *strides), _, _ = _args(x, w, b, self.out)
        bm, bn, bk, s, nw = self.config
        return ((self.programs,), (xa, wa, ba, out, self.part, self.counts, M, N, K, *strides),
                dict(HAS_BIAS=b is not None, GELU=gelu, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP=GROUP_M,
                     NUM_PROGRAMS=self.programs, SPLIT_TAIL=self.split_tail), dict(num_stages=s, num_warps=nw))

    def __call__(self, x, w, b=None, gelu: bool = False):
        grid, args, kwargs, options = self._launch(x, w, b, gelu)
        _persistent_gemm_kernel[grid](*args, **kwargs, **options)
        return self.out

    def bind(self, x, w, b=None, gelu: bool = False):
        """The call bound to these tensors (bound_launch): call it to recompute out from their current values."""
        return _returning(bound_launch(_persistent_gemm_kernel, *self._launch(x, w, b, gelu)), self.out)


def tiles(M: int, N: int, config) -> int:
    """Output tiles of an M x N product with config's (BLOCK_M, BLOCK_N, ...)."""
    return -(-M // config[0]) * -(-N // config[1])
