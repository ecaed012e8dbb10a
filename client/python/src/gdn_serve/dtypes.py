"""Wire dtypes of gdn.v1 and the numpy side of them.

A gdn.v1 Tensor is raw little-endian elements of its DType. numpy has no
bfloat16, so bf16 lives here as uint16 bit patterns; float32 -> bf16 rounds to
nearest even (as the server and torch do), NaN stays NaN.

    DType      wire value  numpy storage  element bytes
    FP32       1           <f4            4
    BF16       2           <u2 (bits)     2
    FP16       3           <f2            2
"""

import numpy as np

__all__ = ["FP32", "BF16", "FP16", "NAMES", "BY_NAME", "NUMPY_STORAGE", "ITEMSIZE",
           "float32_to_bf16_bits", "bf16_bits_to_float32", "is_bf16_numpy"]

FP32 = 1
BF16 = 2
FP16 = 3

NAMES = {FP32: "fp32", BF16: "bf16", FP16: "fp16"}
BY_NAME = {name: value for value, name in NAMES.items()}
NUMPY_STORAGE = {FP32: np.dtype("<f4"), BF16: np.dtype("<u2"), FP16: np.dtype("<f2")}
ITEMSIZE = {FP32: 4, BF16: 2, FP16: 2}


def is_bf16_numpy(dtype: np.dtype) -> bool:
    """True for a numpy dtype that holds bf16: uint16 bits, or ml_dtypes' bfloat16."""
    return dtype == np.uint16 or dtype.name == "bfloat16"


def float32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 [...] -> uint16 [...] bf16 bit patterns, round to nearest even.

    Overflow rounds to +-inf like IEEE; NaN maps to a quiet NaN of the same sign.
    """
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
    out = (rounded >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = ((bits[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return out


def bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """uint16 [...] bf16 bit patterns -> float32 [...] (exact)."""
    return (np.ascontiguousarray(bits).view(np.uint16).astype(np.uint32) << np.uint32(16)).view(
        np.float32)
