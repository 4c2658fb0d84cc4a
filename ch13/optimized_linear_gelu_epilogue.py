"""cuBLASLt's GELU_BIAS epilogue (torch._addmm_activation): bias and GELU applied to each tile in registers.

Chapter 1's optimized variant (ch1/optimized_fused_gelu.py), here to be beside the Triton kernel.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch1.optimized_fused_gelu import prepare  # noqa: F401

if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
