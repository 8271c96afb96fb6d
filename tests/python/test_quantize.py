"""MXFP4 quantization of the package against a numpy implementation of OCP MX written here from
the format's definition, and against bytes worked out by hand."""

import numpy as np
import pytest

import megamoe

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float64)


def reference_quantize(values):
    """OCP MX e2m1 with e8m0 scales: per 32 values along the last axis, scale 2^(floor(log2(amax))
    - 2) (2^-127 for an all-zero block), each value divided by it and rounded to the nearest e2m1
    magnitude (ties to the even code), saturating at 6."""
    v = values.astype(np.float64).reshape(-1, 32)
    amax = np.abs(v).max(axis=1)
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 2, -127)
    e = np.clip(e, -127, 127)
    scaled = np.abs(v) / np.exp2(e)[:, None]
    dist = np.abs(scaled[..., None] - E2M1)
    best = dist.min(axis=-1, keepdims=True)
    candidates = dist == best
    # Ties: the even code (codes 0, 2, 4, 6 are the even ones).
    even = candidates & (np.arange(8) % 2 == 0)
    code = np.where(even.any(axis=-1), even.argmax(axis=-1), candidates.argmax(axis=-1))
    code = code | np.where(np.signbit(v), 8, 0)
    packed = (code[:, 0::2] | (code[:, 1::2] << 4)).astype(np.uint8)
    shape = values.shape[:-1]
    return packed.reshape(*shape, -1), (e + 127).astype(np.uint8).reshape(*shape, -1)


def test_random_blocks_match_the_reference_bytes():
    rng = np.random.default_rng(7)
    v = (rng.standard_normal((6, 10, 256)) * np.exp2(rng.integers(-20, 20, (6, 10, 1)))).astype(np.float32)
    v[0, 0, :32] = 0  # an all-zero block
    packed, scales = megamoe.quantize_mxfp4(v)
    ref_packed, ref_scales = reference_quantize(v)
    assert packed.shape == (6, 10, 128) and scales.shape == (6, 10, 8)
    np.testing.assert_array_equal(scales, ref_scales)
    np.testing.assert_array_equal(packed, ref_packed)


def test_ties_and_saturation_match_the_reference_bytes():
    # Every midpoint between e2m1 magnitudes, with amax 4 (scale 2^0), both signs; and 5.5 -> 6.
    mids = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.5]
    block = np.array(mids + [-m for m in mids] + [4.0] + [0.0] * 15, dtype=np.float32)
    packed, scales = megamoe.quantize_mxfp4(block)
    ref_packed, ref_scales = reference_quantize(block)
    np.testing.assert_array_equal(packed, ref_packed)
    np.testing.assert_array_equal(scales, ref_scales)


def test_a_block_worked_out_by_hand():
    # amax 12: floor(log2 12) - 2 = 1, so scale 2 (e8m0 byte 128). 12/2 = 6 -> code 7; 3/2 = 1.5
    # -> code 3; -1/2 = -0.5 -> code 9; 0.5/2 = 0.25, a tie between 0 and 0.5 -> code 0 (even).
    block = np.zeros(32, dtype=np.float32)
    block[:4] = [12.0, 3.0, -1.0, 0.5]
    packed, scales = megamoe.quantize_mxfp4(block)
    assert scales.tolist() == [128]
    assert packed[:2].tolist() == [0x7 | (0x3 << 4), 0x9 | (0x0 << 4)]
    assert packed[2:].tolist() == [0] * 14


def test_bfloat16_bits_quantize_as_their_float32_values():
    rng = np.random.default_rng(3)
    f = rng.standard_normal(4 * 64).astype(np.float32)
    bits = (f.view(np.uint32) >> 16).astype(np.uint16)  # truncated: exactly representable in bf16
    as_float = (bits.astype(np.uint32) << 16).view(np.float32)
    for a, b in zip(megamoe.quantize_mxfp4(bits), megamoe.quantize_mxfp4(as_float)):
        np.testing.assert_array_equal(a, b)


def test_dequantize_gives_the_e2m1_values_times_the_scales():
    rng = np.random.default_rng(5)
    packed = rng.integers(0, 256, (3, 16), dtype=np.uint8)
    scales = np.array([[120], [127], [131]], dtype=np.uint8)
    values = megamoe.dequantize_mxfp4(packed, scales)
    signed = np.concatenate([E2M1, -E2M1])
    want = np.stack([signed[packed & 15], signed[packed >> 4]], axis=-1).reshape(3, 32)
    want *= np.exp2(scales.astype(np.float64) - 127)
    np.testing.assert_array_equal(values, want.astype(np.float32))


def test_a_last_axis_that_is_no_multiple_of_32_is_refused():
    with pytest.raises(megamoe.Error) as e:
        megamoe.quantize_mxfp4(np.zeros((2, 48), np.float32))
    assert "48" in str(e.value)


def test_float64_is_refused_with_the_dtypes_expected():
    with pytest.raises(megamoe.Error) as e:
        megamoe.quantize_mxfp4(np.zeros(64, np.float64))
    assert "float32" in str(e.value)
