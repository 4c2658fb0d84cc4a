"""The Triton kernels of the zero-copy pairs: preparing a batch of images, gathering rows of a table.

Each kernel takes a pointer and does not care where it points. Given a CUDA tensor it reads device
memory; given a tensor in pinned (page-locked) host memory it reads the host's RAM across PCIe, with
no copy: on a 64-bit system with unified addressing every pinned allocation is mapped into the GPU's
address space, and Triton's launcher asks the driver for that mapping
(cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_POINTER)). Pageable memory has no such mapping, and
the launch fails with "Pointer argument cannot be accessed from Triton (cpu tensor?)".

    normalize_channels(x, out)    out = (x - mean[c]) / std[c] in bf16, with the dataset's per-channel
                                  mean and std: one kernel, every input element read once
    standardize_images(x, out)    out = (x - mean_i) / max(std_i, 1/sqrt(n)) in bf16 with each image's own
                                  mean and std (tf.image.per_image_standardization): a statistics kernel,
                                  then a normalizing kernel, so every input element is read twice
    gather_rows(table, idx, out)  out[i] = table[idx[i]]: only the rows asked for are read, each once

Importing this module without Triton works (TRITON is False), so that the pairs load and skip.
"""
from __future__ import annotations

import math

import torch

try:
    import triton
    import triton.language as tl
    TRITON = True
except ImportError:  # the pairs declare REQUIRES = ("triton",)
    TRITON = False

MEAN = (0.485, 0.456, 0.406)  # ImageNet's per-channel statistics, for images scaled to [0, 1]
STD = (0.229, 0.224, 0.225)
BLOCK = 1024  # elements per program, 4 KB of fp32. Reading a pinned 154 MB batch on the H100 with 4 warps, 1024-element
#              blocks ran at 49.5 GB/s and 4096-element ones at 45.2; 4096 with 2 or 8 warps at 48.8 and 49.2: the pair
#              matters, not the size alone (scripts/zero_copy_probe.py, profiles/h100/topics-3c040d8/probe)

if TRITON:
    @triton.jit
    def _normalize_channels(x_ptr, out_ptr, plane, m0, m1, m2, r0, r1, r2, BLOCK: tl.constexpr):
        # grid: (images * 3 channel planes, blocks per plane); the channel is the plane's index mod 3
        p = tl.program_id(0)
        c = p % 3
        mean = tl.where(c == 0, m0, tl.where(c == 1, m1, m2))
        rstd = tl.where(c == 0, r0, tl.where(c == 1, r1, r2))
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < plane
        base = p.to(tl.int64) * plane
        x = tl.load(x_ptr + base + offs, mask=mask)
        tl.store(out_ptr + base + offs, ((x - mean) * rstd).to(tl.bfloat16), mask=mask)

    @triton.jit
    def _image_stats(x_ptr, mean_ptr, rstd_ptr, numel, BLOCK: tl.constexpr):
        # one program per image: sum and sum of squares over its numel elements, in fp32 lanes
        img = tl.program_id(0).to(tl.int64)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        acc2 = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, numel, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + img * numel + offs, mask=offs < numel, other=0.0)
            acc += x
            acc2 += x * x
        mean = tl.sum(acc, axis=0) / numel
        var = tl.maximum(tl.sum(acc2, axis=0) / numel - mean * mean, 0.0)
        std = tl.maximum(tl.sqrt(var), 1.0 / tl.sqrt(numel.to(tl.float32)))
        tl.store(mean_ptr + img, mean)
        tl.store(rstd_ptr + img, 1.0 / std)

    @triton.jit
    def _normalize_images(x_ptr, out_ptr, mean_ptr, rstd_ptr, numel, BLOCK: tl.constexpr):
        img = tl.program_id(0).to(tl.int64)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < numel
        x = tl.load(x_ptr + img * numel + offs, mask=mask)
        y = (x - tl.load(mean_ptr + img)) * tl.load(rstd_ptr + img)
        tl.store(out_ptr + img * numel + offs, y.to(tl.bfloat16), mask=mask)

    @triton.jit
    def _gather_rows(table_ptr, idx_ptr, out_ptr, n_idx, D: tl.constexpr, ROWS: tl.constexpr):
        # ROWS rows a program: their indices, then each row's D contiguous values, to the output's rows
        r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        live = r < n_idx
        idx = tl.load(idx_ptr + r, mask=live, other=0).to(tl.int64)
        cols = tl.arange(0, D)
        rows = tl.load(table_ptr + idx[:, None] * D + cols[None, :], mask=live[:, None])
        tl.store(out_ptr + r.to(tl.int64)[:, None] * D + cols[None, :], rows, mask=live[:, None])


def gather_rows(table: torch.Tensor, idx: torch.Tensor, out: torch.Tensor, rows: int = 32) -> torch.Tensor:
    """out[i] = table[idx[i]]; table (R, D) and idx (N,) on the GPU or in pinned host memory, out (N, D) on
    the GPU. D must be a power of two (one program loads whole rows)."""
    d = table.shape[1]
    assert d & (d - 1) == 0 and table.is_contiguous() and out.shape == (idx.numel(), d)
    _gather_rows[(triton.cdiv(idx.numel(), rows),)](table, idx, out, idx.numel(), D=d, ROWS=rows)
    return out


def normalize_channels(x: torch.Tensor, out: torch.Tensor, block: int = BLOCK, num_warps: int = 4) -> torch.Tensor:
    """x: (N, 3, H, W) float32, on the GPU or in pinned host memory; out: the same shape in bf16 on the GPU."""
    n, c, h, w = x.shape
    assert c == 3 and x.is_contiguous() and out.is_contiguous() and out.shape == x.shape
    grid = (n * c, triton.cdiv(h * w, block))
    _normalize_channels[grid](x, out, h * w, *MEAN, *(1.0 / s for s in STD), BLOCK=block, num_warps=num_warps)
    return out


def standardize_images(x: torch.Tensor, out: torch.Tensor, stats: torch.Tensor) -> torch.Tensor:
    """Per-image standardization of x (N, C, H, W) float32 (GPU or pinned host) into out (bf16, GPU);
    stats is a (2, N) float32 GPU buffer for each image's mean and 1/std."""
    n = x.shape[0]
    numel = x[0].numel()
    assert x.is_contiguous() and out.is_contiguous() and out.shape == x.shape and stats.shape == (2, n)
    _image_stats[(n,)](x, stats[0], stats[1], numel, BLOCK=BLOCK)
    _normalize_images[(n, triton.cdiv(numel, BLOCK))](x, out, stats[0], stats[1], numel, BLOCK=BLOCK)
    return out


def reference_channels(x: torch.Tensor) -> torch.Tensor:
    """normalize_channels in torch (fp32, then one rounding to bf16): what the tests check the kernel against."""
    mean = torch.tensor(MEAN, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(STD, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return ((x - mean) / std).to(torch.bfloat16)


def reference_images(x: torch.Tensor) -> torch.Tensor:
    """standardize_images in torch: each image's mean and population std over all its elements."""
    flat = x.reshape(x.shape[0], -1).double()
    mean = flat.mean(dim=1, keepdim=True)
    std = flat.std(dim=1, unbiased=False, keepdim=True).clamp_min(1.0 / math.sqrt(flat.shape[1]))
    return ((flat - mean) / std).to(torch.bfloat16).view_as(x)


def reference_gather(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return table[idx.to(table.device)]


def main(argv=None) -> int:
    """Check the three kernels against torch on pinned host inputs (zero copy) and on device inputs."""
    import argparse
    import os
    import sys
    argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="On a GPU: checks each kernel on pinned host "
                            "memory and on device memory against torch. Without one: TRITON_INTERPRET=1 runs them on "
                            "the CPU.").parse_args(argv)
    if not TRITON:
        print("error: ch1/image_kernels.py needs Triton, which this Python cannot import", file=sys.stderr)
        return 2
    gpu = torch.cuda.is_available()
    if not gpu and os.environ.get("TRITON_INTERPRET") != "1":
        print("error: ch1/image_kernels.py needs a CUDA GPU (or TRITON_INTERPRET=1 to run the kernels on the CPU)",
              file=sys.stderr)
        return 2
    dev = "cuda" if gpu else "cpu"
    g = torch.Generator().manual_seed(0)
    x = torch.rand(5, 3, 40, 120, generator=g)
    table, idx = torch.randn(1000, 64, generator=g), torch.randint(0, 1000, (77,), generator=g)
    sources = {"pinned host": (x.pin_memory(), table.pin_memory(), idx.pin_memory())} if gpu else {}
    sources["device"] = (x.to(dev), table.to(dev), idx.to(dev))
    for where, (xs, ts, ids) in sources.items():
        checks = {
            "normalize_channels": (normalize_channels(xs, torch.empty(x.shape, dtype=torch.bfloat16, device=dev)),
                                   reference_channels(x.to(dev))),
            "standardize_images": (standardize_images(xs, torch.empty(x.shape, dtype=torch.bfloat16, device=dev),
                                                      torch.empty(2, 5, device=dev)), reference_images(x.to(dev))),
            "gather_rows": (gather_rows(ts, ids, torch.empty(77, 64, device=dev)), reference_gather(table.to(dev), idx)),
        }
        for name, (out, ref) in checks.items():
            err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
            print(f"{name:20s} {where:12s} max error {err:.1e} of max|ref|  {'ok' if err <= 2 ** -6 else 'MISMATCH'}")
            if not err <= 2 ** -6:
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
