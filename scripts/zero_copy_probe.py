#!/usr/bin/env python3
"""Chapter 1's zero-copy pairs taken apart on a GPU, with the harness's timer.

    dense read     normalize_channels on a pinned 256-image batch (154 MB) for several program sizes and
                   warp counts: how close SM loads across PCIe come to the copy engine's DMA rate
    gather         the host_gather pair's kernel (65,536 rows of 512 B from a 512 MiB pinned table) fed
                   the same indices every sample and fed new ones: whether anything on the GPU keeps rows
                   of host memory between calls (it would make a repeated call look faster)
    gather, parts  the baseline's two steps alone: the CPU's index_select into pinned memory, the DMA

Each row: ms per call (median), GB/s of the bytes that cross the link.

  python scripts/zero_copy_probe.py OUT.md      (GPU only; a .json beside it)
"""
import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=pathlib.Path, help="Markdown table (a .json beside it)")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds of timing per row")
    a = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("error: scripts/zero_copy_probe.py needs a CUDA GPU; none is visible to PyTorch", file=sys.stderr)
        return 2
    from ch1 import baseline_host_gather as hg
    from ch1.image_kernels import gather_rows, normalize_channels
    from ch1.zero_copy_sweep import feed_host
    from common.timing import time_call

    dev = torch.device("cuda")
    rows = []

    def measure(name, fn, link_bytes, feed=None, on=dev):
        ms = time_call(fn, on, budget_s=a.budget, feed=feed).median_ms
        rows.append({"row": name, "ms": ms, "gbps": link_bytes / (ms * 1e-3) / 1e9})
        print(f"{name:48s} {ms:8.4f} ms  {rows[-1]['gbps']:6.1f} GB/s", flush=True)

    g = torch.Generator().manual_seed(0)
    values = [torch.rand(256, 3, 224, 224, generator=g) for _ in range(2)]
    images = values[0].pin_memory()
    out = torch.empty(images.shape, dtype=torch.bfloat16, device=dev)
    staged = torch.empty(images.shape, device=dev)
    new_images = lambda i: feed_host(images, values[i % 2])  # noqa: E731
    measure("dense: DMA alone", lambda: staged.copy_(images, non_blocking=True), images.numel() * 4, new_images)
    for block in (512, 1024, 2048, 4096, 16384):
        for warps in (2, 4, 8):
            fn = lambda b=block, nw=warps: normalize_channels(images, out, block=b, num_warps=nw)  # noqa: E731
            ref = normalize_channels(staged.copy_(images), torch.empty_like(out))  # the values fed last
            assert torch.equal(fn(), ref), (block, warps)
            measure(f"dense: zero copy, BLOCK {block}, {warps} warps", fn, images.numel() * 4, new_images)

    w = hg.workload(0, dev)
    table, idx = w.inputs["table"], w.inputs["idx"]
    link = idx.numel() * (table.shape[1] * 4 + 8)
    gout = torch.empty(idx.numel(), table.shape[1], device=dev)
    assert torch.equal(gather_rows(table, idx, gout).cpu(), table[idx])
    other = [idx.clone(), torch.randint(0, table.shape[0], idx.shape, generator=g)]
    # the same feed for both rows (a sync, then a copy into the pinned indices): only the values differ
    measure("gather: zero copy, the same indices each call", lambda: gather_rows(table, idx, gout), link,
            lambda i: feed_host(idx, other[0]))
    measure("gather: zero copy, new indices each call", lambda: gather_rows(table, idx, gout), link,
            lambda i: feed_host(idx, other[i % 2]))
    staging = torch.empty(idx.numel(), table.shape[1]).pin_memory()
    measure("gather, parts: CPU index_select alone", lambda: torch.index_select(table, 0, idx, out=staging), link,
            on=torch.device("cpu"))  # host work: timed by the host's clock
    measure("gather, parts: DMA alone", lambda: gout.copy_(staging, non_blocking=True), link)

    a.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "threads": torch.get_num_threads()}
    a.out.with_suffix(".json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
    a.out.write_text(f"# Zero-copy probe on {meta['device']} (torch {meta['torch']}, {meta['threads']} CPU threads)\n\n"
                     "| row | ms | GB/s across the link |\n| --- | ---: | ---: |\n" +
                     "".join(f"| {r['row']} | {r['ms']:.4f} | {r['gbps']:.1f} |\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
