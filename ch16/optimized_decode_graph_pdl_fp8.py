"""The PDL step with float8 weights: half the bytes of the bf16 floor, dequantized in registers.

At batch 1 the step's time is its weights' bytes over the copy rate, so the next step past the bf16 floor
is fewer bytes. Every product's weight (Q/K/V, output, gate/up, down, the LM head) is stored once in
float8 e4m3 with one fp32 scale per output row; the kernels are the PDL step's, loading 1-byte weights,
widening them to fp32 in registers, and applying the row's scale to the row's sum. The format and its
loads (quantize_rows, weight_tile, row_scales) are ch13/fp8_weight_only.py's, the file whose Triton
product is chapter 13's weight-only float8 variant (ch13/optimized_fp8_linear_triton.py). Activations, norms and the KV cache stay bf16. It reads 822 MB a step against 1608 MB.

Precision: float8 weights change the model (3 mantissa bits, a relative error up to 1/16 per weight), so
the variant declares PRECISION = "fp8" and is verified at that tolerance against the eager bf16 step;
ch16/decode_profile.py compares its logits with the fp32 step and its greedy token with the fp32 one.
bytes_moved: the bytes it reads (its own floor); the README and decode_profile compare it with the bf16
floor too.

Measured on the H100 at 861dee0 (profiles/h100/ch16-decode-861dee0): 0.5132 ms a token, under the bf16
floor (0.535 ms) and 53.3% of its own (822 MB: 0.273 ms); 3.5e-02 from eager bf16 and 3.54e-02 from the fp32
step, whose greedy token it keeps. The block sizes are the bf16 step's.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.pdl_step import prepare_pdl, step_bytes

DEVICES = ("cuda",)
REQUIRES = ("triton",)
PRECISION = "fp8"


def bytes_moved(w):
    return step_bytes(w.inputs["model"], int(w.inputs["input_pos"].max()) + 1, fp8=True)


def prepare(w):
    return prepare_pdl(w, fp8=True)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
