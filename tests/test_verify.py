import math

import torch

from common.verify import check_inputs_random, responds_to_inputs, verify_outputs


def ref():
    return [torch.randn(256, 64, generator=torch.Generator().manual_seed(0))]


def test_identical_output_passes():
    r = ref()
    assert verify_outputs(r, [r[0].clone()]).ok


def test_wrong_result_fails_with_error_figures():
    r = ref()
    v = verify_outputs(r, [r[0] * 1.01])
    assert not v.ok
    assert v.rel_err > 5e-3 and "tolerance" in v.message


def test_one_wrong_element_fails():
    r = ref()
    out = r[0].clone()
    out[3, 5] += 10 * float(r[0].abs().max())
    assert not verify_outputs(r, [out]).ok


def test_nan_and_inf_fail():
    r = ref()
    for bad in (math.nan, math.inf):
        out = r[0].clone()
        out[0, 0] = bad
        v = verify_outputs(r, [out])
        assert not v.ok and "NaN/Inf" in v.message


def test_shape_and_dtype_changes_fail():
    r = ref()
    assert "shape" in verify_outputs(r, [r[0].reshape(64, 256)]).message
    assert "dtype" in verify_outputs(r, [r[0].double()]).message
    assert not verify_outputs(r, [r[0], r[0]]).ok


def test_tolerance_follows_precision():
    r = ref()
    bf16 = [r[0].bfloat16().float()]  # rounding to bf16: ~2e-3 relative error
    assert not verify_outputs(r, bf16, "fp32").ok
    assert verify_outputs(r, bf16, "bf16").ok
    # a declared precision may return its own dtype; an undeclared one may not
    assert verify_outputs(r, [r[0].bfloat16()], "bf16", allowed_dtypes=(torch.bfloat16,)).ok
    assert not verify_outputs(r, [r[0].bfloat16()], "bf16").ok


def test_constant_output_is_caught():
    a = [torch.ones(8)]
    assert not responds_to_inputs(a, [torch.ones(8)])
    assert responds_to_inputs(a, [torch.arange(8.0)])


def test_zero_inputs_are_refused():
    assert "constant" in check_inputs_random({"x": torch.zeros(100)})
    assert check_inputs_random({"x": torch.randn(100), "n": 3}) is None
