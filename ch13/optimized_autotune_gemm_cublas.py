"""cuBLAS (a @ b): NVIDIA's heuristics choose the kernel, no autotuning time at all."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
DEVICES = ("cuda",)


def prepare(w):
    a, b = w.inputs["a"], w.inputs["b"]
    return lambda: a @ b


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
