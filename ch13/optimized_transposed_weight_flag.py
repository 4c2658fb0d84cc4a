"""No copy at all: y = x @ W.t() on the (out, in) weight as stored, which is F.linear.

W.t() is a view: the same memory with its strides swapped. matmul passes it to cuBLAS with the transpose
flag set (a "TN" product) and cuBLAS reads W in its stored layout; no (in, out) copy is made, ever. Where
the consumer is cuBLAS (torch.matmul, F.linear, nn.Linear), this is why nn.Linear stores (out, in) and
never pays for it: the transposed layout is free. A pre-transposed copy pays only for a kernel that cannot
take a transposed operand. Prepared once: nothing. Per call: x.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch.nn.functional as F

from common import Workload


def prepare(w: Workload):
    x, weight = w.inputs["x"], w.inputs["w"]
    return lambda: F.linear(x, weight)   # x @ weight.t(), the view handed to cuBLAS with its transpose flag


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
