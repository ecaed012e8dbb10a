"""use_remote_gdn on a small random Qwen3-Next against the same model run
natively: logits of a prefill, 16 decode steps and a 16-token generate()
within transformers_check.BOUND (skipped without torch and transformers)."""

import pytest

import gdn_serve

pytest.importorskip("torch")
pytest.importorskip("transformers")
transformers_check = pytest.importorskip("transformers_check")


@pytest.fixture
def fp32_client(server_fp32):
    with gdn_serve.Client(server_fp32.address, timeout=120) as c:
        yield c


def test_remote_gdn_matches_native(fp32_client):
    results = transformers_check.compare(fp32_client)
    print(results)
    assert results["generate_same_tokens"] and results["generated_tokens"] >= 16
    for key in ("prefill_rel_error", "decode_rel_error_max", "generate_rel_error",
                "no_cache_rel_error", "batch1_rel_error"):
        assert results[key] <= transformers_check.BOUND, (key, results[key])
    assert results["restored_bitwise"] and results["passed"]
    assert not fp32_client.list_sessions()  # handle.close() closed every session


def test_refusals(client, fp32_client):
    from gdn_serve.transformers import use_remote_gdn
    model = transformers_check.tiny_model()
    with pytest.raises(gdn_serve.InvalidArgument, match="gating"):
        fused = gdn_serve.Client(fp32_client.target)
        fused._info = fp32_client.info()
        fused._info.config.gating_mode = "fused"
        use_remote_gdn(model, fused)
    big = gdn_serve.Client(fp32_client.target)
    big._info = fp32_client.info()
    big._info.config.num_v_heads = 8
    with pytest.raises(gdn_serve.InvalidArgument, match="shape"):
        use_remote_gdn(model, big)


def test_one_handle_per_model(fp32_client):
    from gdn_serve.transformers import use_remote_gdn
    model = transformers_check.tiny_model()
    with use_remote_gdn(model, fp32_client):
        with pytest.raises(gdn_serve.InvalidArgument, match="already patched"):
            use_remote_gdn(model, fp32_client)
    use_remote_gdn(model, fp32_client).close()  # free again after the first closed
