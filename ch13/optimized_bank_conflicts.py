"""The same tile with one float of padding per row (tile[32][33]): a column now spans all 32 banks.

Row stride 33 floats: element (tx, c) sits in bank (33 tx + c) mod 32 = (tx + c) mod 32, a different bank
for each of the warp's 32 threads. One extra float per row, 4 KiB -> 4.1 KiB of shared memory per block;
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum drops to ~0.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch13.baseline_bank_conflicts import prepare as transpose_prepare


def prepare(w):
    return transpose_prepare(w, padded=True)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
