"""The static-cache step captured in a CUDA graph (chapter 16's decode_graph pair): with the prefix
cached, what is left of a step is some 900 small kernel launches (892 for decode_graph's batch-1 step:
profiles/h100/ch16-c8b4e68/decode_profile.md), and a graph submits them in one call."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.optimized_decode_graph import prepare  # noqa: F401

DEVICES = ("cuda",)

if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
