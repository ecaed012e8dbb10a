"""bf16 conversion of numpy float32 (round to nearest even), checked bit by bit."""

import numpy as np

from gdn_serve import dtypes


def _f32(bits):
    return np.array(bits, np.uint32).view(np.float32)


def test_round_to_nearest_even():
    cases = {
        0x3F800000: 0x3F80,  # 1.0
        0x3F808000: 0x3F80,  # tie, even stays
        0x3F818000: 0x3F82,  # tie, odd rounds up
        0x3F808001: 0x3F81,  # above the tie
        0xBF80FFFF: 0xBF81,  # negative
        0x7F7FFFFF: 0x7F80,  # FLT_MAX rounds to +inf
        0x7F800000: 0x7F80,  # +inf
        0x00000001: 0x0000,  # denormal underflows
    }
    got = dtypes.float32_to_bf16_bits(_f32(list(cases)))
    np.testing.assert_array_equal(got, np.array(list(cases.values()), np.uint16))


def test_nan_stays_nan_and_round_trip_is_exact():
    nan = dtypes.float32_to_bf16_bits(_f32([0x7FC00001, 0xFF800001]))
    assert np.isnan(dtypes.bf16_bits_to_float32(nan)).all()
    bits = np.arange(0, 65536, 7, dtype=np.uint16)
    finite = bits[np.isfinite(dtypes.bf16_bits_to_float32(bits))]
    np.testing.assert_array_equal(dtypes.float32_to_bf16_bits(dtypes.bf16_bits_to_float32(finite)), finite)


def test_matches_torch_where_available():
    try:
        import torch
    except ImportError:
        return
    x = np.random.default_rng(0).standard_normal(10000).astype(np.float32) * 1e3
    want = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(dtypes.float32_to_bf16_bits(x), want)
