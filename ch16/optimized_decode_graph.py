"""The same step captured once in a CUDA graph, by hand, and replayed: one launch for 892 kernels.

The graph reads the token, its position and the cache from the workload's tensors, so a real loop
writes the next token into `token` and bumps `input_pos` in place (both on the GPU, no sync), then
replays. Capture (with a warm-up on a side stream) is prepared once; the replay is the timed call.
What remains is the kernels themselves: 892 a token, 2.2 ms of GPU time, 0.64 ms of it in element-wise
and norm kernels and 0.43 ms in cache writes and copies (profiles/h100/ch16-c8b4e68/decode_profile.md).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.decode import capture_graph
from ch16.model import KVCache, decode_step

DEVICES = ("cuda",)


def prepare(w):
    model, token, pos = w.inputs["model"], w.inputs["token"], w.inputs["input_pos"]
    cache = KVCache(w.inputs["k_cache"], w.inputs["v_cache"])
    return capture_graph(lambda: decode_step(model, cache, token, pos))


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
