"""A preallocated static KV cache: the step computes K and V for the new token only, writes them at
its position, and attends over the cache: one token's worth of matmul work instead of 1025.

The cached step is the same one chapter 16's decode_graph pair starts from, so its prepare() is
imported from there: the model and the cache are prepared once; the token and its position are fed
each call, and the cache is the state the step updates."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702

from ch16.baseline_decode_graph import prepare  # noqa: F401 - the cached decode step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
