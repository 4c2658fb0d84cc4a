"""Pitfall: the (in, out) copy of W made on every call, y = x @ W.t().contiguous().

What feeding a kernel that wants the transposed layout from nn.Linear's (out, in) weight looks like when the
copy is not hoisted out of the call: each call reads W, writes its transposed copy, then the product reads
the copy: three passes over 470 MB where the baseline makes one, and a transposing copy, which reads or writes
one side with a stride, runs below the copy rate. Kept to teach the rule: transpose a weight once, at load
time, or hand the transposed view to a consumer that takes it (cuBLAS, through F.linear). Prepared once:
nothing. Per call: x, and the copy of W.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from common import Workload

KIND = "pitfall"


def prepare(w: Workload):
    x, weight = w.inputs["x"], w.inputs["w"]
    return lambda: x @ weight.t().contiguous()   # a fresh (in, out) copy of W, every call


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
