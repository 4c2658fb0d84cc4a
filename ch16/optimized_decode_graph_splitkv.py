"""The _fused step with split-KV attention (flash-decoding): a Triton kernel reads only the filled
positions of the cache (not all 1088 slots), split across ~16 programs per KV head so that at batch 1
more than 8 SMs stream the cache, and merges the partial softmaxes; compiled with reduce-overhead.

Against the masked matmul attention this saves the unfilled part of the cache and 4 kernels per layer
(scores, mask, softmax, PV become one kernel and a small merge). Needs a GPU and Triton."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.optimized_decode_graph_fused import prepare as fused_prepare
from ch16.paged import attend_contiguous

DEVICES = ("cuda",)
REQUIRES = ("triton",)  # where it is missing the variant is skipped with the reason
PAGE = 16


def split_kv_attention(q, k_layer, v_layer, input_pos):
    """q (B, Hq, 1, hd) at input_pos (1,) over the static cache (B, Hkv, S, hd) -> (B, Hq, 1, hd)."""
    B, Hkv, S = k_layer.shape[:3]
    splits = max(1, min(S // PAGE, 128 // (B * Hkv)))
    lengths = (input_pos + 1).expand(B)
    return attend_contiguous(q[:, :, 0], k_layer, v_layer, lengths, PAGE, splits)[:, :, None]


def prepare(w, compile: bool = True):
    return fused_prepare(w, compile, split_kv_attention)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
