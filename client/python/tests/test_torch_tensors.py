"""torch tensors in and out (skipped where torch is not importable): o comes
back as a torch tensor of v's dtype and device; bf16 goes on the wire as its
own bits, so a torch bf16 call and a numpy call of the same bits agree bitwise."""

import numpy as np
import pytest

import gdn_serve
from gdn_serve import dtypes
from inputs import TOLERANCE, direct_inputs
from reference import gdn_reference, relative_error, round_to

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_torch_in_torch_out(any_dtype_client, dtype, device):
    client = any_dtype_client
    wire = client.config.activation_dtype
    x = direct_inputs(np.random.default_rng(10), 9, client.config)
    t = {n: torch.from_numpy(a).to(device) for n, a in x.items()}
    s = client.session()
    o = s.forward(0, t["q"].to(dtype), t["k"].to(dtype), t["v"].to(dtype), t["g"], t["beta"])
    assert isinstance(o, torch.Tensor)
    assert o.dtype == dtype and o.device.type == device and tuple(o.shape) == (9, 4, 64)
    # What the server saw: the inputs rounded to the torch dtype, then to the wire dtype.
    seen = {n: round_to(t[n].to(dtype).float().cpu().numpy(), wire) for n in ("q", "k", "v")}
    ref, _ = gdn_reference(seen["q"], seen["k"], seen["v"], x["g"], x["beta"])
    bound = TOLERANCE[dtypes.NAMES[wire]]
    if dtype != torch.float32:  # o rounded once more, to the torch dtype
        bound += 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
    assert relative_error(o.float().cpu().numpy(), ref) < bound
    s.close()


def test_bf16_tensor_sends_its_own_bits(client):
    x = direct_inputs(np.random.default_rng(11), 4, client.config)
    t = {n: torch.from_numpy(x[n]).to(torch.bfloat16) for n in ("q", "k", "v")}
    bits = {n: t[n].view(torch.int16).numpy().view(np.uint16) for n in t}
    a, b = client.create_session(), client.create_session()
    o_torch = client.forward(0, [(a, 0, 4)], t["q"], t["k"], t["v"], x["g"], x["beta"])
    o_bits = client.forward(0, [(b, 0, 4)], bits["q"], bits["k"], bits["v"], x["g"], x["beta"])
    np.testing.assert_array_equal(o_torch.view(torch.int16).numpy().view(np.uint16), o_bits)


def test_torch_output_is_writable_memory_of_its_own(client):
    x = direct_inputs(np.random.default_rng(12), 2, client.config)
    s = client.session()
    o = s.forward(0, *(torch.from_numpy(x[n]) for n in ("q", "k", "v", "g", "beta")))
    o.mul_(2)  # no warning, no error: the tensor owns its memory
    assert torch.isfinite(o).all()


def test_integer_tensor_refused(client):
    x = direct_inputs(np.random.default_rng(13), 2, client.config)
    with pytest.raises(gdn_serve.InvalidArgument, match="not a floating type"):
        client.forward(0, [("x", 0, 2)], torch.zeros(2, 2, 64, dtype=torch.int32), x["k"],
                       x["v"], x["g"], x["beta"])


def test_split_call_returns_torch_like_numpy(server_bf16):
    small = gdn_serve.Client(server_bf16.address, timeout=60, max_part_bytes=80_000)
    x = direct_inputs(np.random.default_rng(14), 40, small.config)
    bits = {n: dtypes.float32_to_bf16_bits(x[n]) for n in ("q", "k", "v")}
    t = {n: torch.from_numpy(x[n]).to(torch.bfloat16) for n in ("q", "k", "v")}
    a, b = small.session(), small.session()
    o_numpy = a.forward(1, bits["q"], bits["k"], bits["v"], x["g"], x["beta"])
    o_torch = b.forward(1, t["q"], t["k"], t["v"], x["g"], x["beta"])
    assert a.positions[1] == b.positions[1] == 40 and o_torch.dtype == torch.bfloat16
    np.testing.assert_array_equal(o_torch.view(torch.int16).numpy().view(np.uint16), o_numpy)
    o_torch.add_(1)  # its own memory
    small.close()
