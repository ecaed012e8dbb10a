"""ctypes mirror of kernels/capi/gdn_capi.h, for Python callers (benchmarks,
other runtimes): the two structs, field for field, and a loader that sets the
argument types. Only ctypes here; callers pass raw device pointers
(e.g. torch's tensor.data_ptr()) and a CUDA stream handle."""

import ctypes


class Config(ctypes.Structure):
    """gdn_capi_config."""
    _fields_ = [("num_qk_heads", ctypes.c_int32), ("num_v_heads", ctypes.c_int32),
                ("head_dim_k", ctypes.c_int32), ("head_dim_v", ctypes.c_int32),
                ("input_dtype", ctypes.c_int32),  # 0 fp32, 1 bf16, 2 fp16
                ("state_dtype", ctypes.c_int32),  # 0 fp32, 1 bf16, 2 int8, 3 fp8
                ("gating", ctypes.c_int32),       # 0 direct, 1 fused
                ("l2_norm_qk", ctypes.c_int32),
                ("scale", ctypes.c_float)]        # 0: K^-1/2


class Args(ctypes.Structure):
    """gdn_capi_args: device pointers except cu_seqlens_host."""
    _fields_ = [("num_seqs", ctypes.c_int32), ("total_tokens", ctypes.c_int32),
                ("cu_seqlens", ctypes.c_void_p), ("cu_seqlens_host", ctypes.c_void_p),
                ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("o", ctypes.c_void_p), ("g", ctypes.c_void_p), ("beta", ctypes.c_void_p),
                ("a", ctypes.c_void_p), ("b", ctypes.c_void_p), ("A_log", ctypes.c_void_p),
                ("dt_bias", ctypes.c_void_p), ("pool_base", ctypes.c_void_p),
                ("page_bytes", ctypes.c_int64), ("num_pages", ctypes.c_int32),
                ("initial_pages", ctypes.c_void_p), ("final_pages", ctypes.c_void_p)]


# gdn_prefill_variant codes: which prefill kernel runs.
PREFILL_AUTO, PREFILL_RECURRENT, PREFILL_CHUNKED = 0, 1, 2
# gdn_chunked_prefill_tuned's state_variant codes of the chunked prefill's
# generation (ChunkedGeneration, kernels/cuda/chunked_prefill.h): 0 / -1 the
# router, 7 v7 forced, 8 v8 forced (4 / 5: v7's kernel-2 forms), 9 v8's span
# path (one sequence; spans planned), CHUNKED_V8_SPANS_OF + P: P spans.
CHUNKED_ROUTED, CHUNKED_V7, CHUNKED_V8, CHUNKED_V8_SPANS = -1, 7, 8, 9
CHUNKED_V8_SPANS_OF = 900


def load(path):
    """Opens libgdn_capi.so with the argument and result types set."""
    lib = ctypes.CDLL(path)
    for entry in ("gdn_decode", "gdn_prefill"):
        f = getattr(lib, entry)
        f.argtypes = [ctypes.POINTER(Config), ctypes.POINTER(Args), ctypes.c_void_p]
        f.restype = ctypes.c_int
    # (config, args, stream, variant): decode variant / PREFILL_* code.
    for entry in ("gdn_decode_variant", "gdn_prefill_variant"):
        f = getattr(lib, entry)
        f.argtypes = [ctypes.POINTER(Config), ctypes.POINTER(Args), ctypes.c_void_p, ctypes.c_int]
        f.restype = ctypes.c_int
    # (config, args, stream, v_tile, stages, prep_variant, state_variant): the
    # chunked kernel's knobs.
    lib.gdn_chunked_prefill_tuned.argtypes = [ctypes.POINTER(Config), ctypes.POINTER(Args),
                                              ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                              ctypes.c_int, ctypes.c_int]
    lib.gdn_chunked_prefill_tuned.restype = ctypes.c_int
    lib.gdn_prefill_workspace_bytes.argtypes = [ctypes.c_void_p]
    lib.gdn_prefill_workspace_bytes.restype = ctypes.c_int64
    lib.gdn_last_error.restype = ctypes.c_char_p
    lib.gdn_page_bytes.argtypes = [ctypes.POINTER(Config)]
    lib.gdn_page_bytes.restype = ctypes.c_int64
    return lib
