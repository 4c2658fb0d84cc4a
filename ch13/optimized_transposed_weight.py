"""The weight kept transposed, (in, out), made once at load time: y = x @ Wt.

The layout a kernel that wants its weight K-major needs, made once when the model is loaded, not in the
call. With cuBLAS as the consumer this is the same product as the baseline's with the other transpose flag:
both read W once, and what differs is only which of cuBLAS's kernels runs for each layout. The figure says
whether that choice is worth a copy of W at load time (at the pair's shape, and across shapes in
ch13/transpose_sweep.py). Memory: a second copy of W if the original is kept; the layer here holds only Wt.
Prepared once: Wt. Per call: x.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from common import Workload


def prepare(w: Workload):
    x = w.inputs["x"]
    weight_t = w.inputs["w"].t().contiguous()   # once, at load time
    return lambda: x @ weight_t


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
