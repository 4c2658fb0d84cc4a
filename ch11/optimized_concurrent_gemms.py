"""The same 16 GEMMs, each on a stream of its own, so they all run on the GPU at once.

Kernels on different streams may execute concurrently: while one GEMM's 4 to
32 blocks occupy as many SMs, the block scheduler places the other streams'
blocks on idle SMs, and the 245 blocks of all 16 fit on the 132 SMs at once.
The longest K is issued first, as the grouped variant does. Each stream first
waits for the caller's stream, and the caller's stream waits for all of them at
the end, so the result is complete where the caller (and its timer) looks.
Prepared once: the streams, besides the baseline's weights and output buffer.

On the H100: 0.689 ms, 7.33x (at b77aede, in SHAPES order: 0.676-0.741 ms,
7.0-7.45x in four runs; longest K first did not help: one sweep read 0.704 ms
against 0.693 in SHAPES order). Fewer streams run several GEMMs one after the
other on each: 8 streams 0.88 ms, 4 streams 1.57 ms. Streams give no order
between kernels: which blocks reach the SMs first depends on when each
stream's launch arrives, and some calls run slow (in one b77aede run, 10% at
1.04 ms against 0.69; p90 above 1 ms in two more).
optimized_concurrent_gemms_grouped.py issues the same tiles in one launch, in
an order it chooses.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch11.baseline_concurrent_gemms import GEMMS, LONGEST_K_FIRST, kernels, operands

DEVICES = ("cuda",)
STREAMS = GEMMS  # fewer streams run two or more GEMMs one after the other on each


def prepare(w: Workload):
    ext = kernels()
    a, b, out, outs = operands(w)
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]

    def run():
        main = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(main)
        for j, i in enumerate(LONGEST_K_FIRST):
            with torch.cuda.stream(streams[j % STREAMS]):
                ext.tile_gemm(a[i], b[i], outs[i])
        for s in streams:
            main.wait_stream(s)
        return out
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
