"""TLS (with certificates made here by the openssl command), mutual TLS and
bearer tokens against a real gdn-server: the sync and asyncio clients'
root_certificates / certificate_chain / private_key / token arguments, and
tenant isolation as a client sees it (README: Security)."""
import asyncio
import os
import shutil
import subprocess

import numpy as np
import pytest

import gdn_serve
import gdn_serve.aio
from conftest import _start

ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789ab"


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _cert(d, name, subject, ca=None, san=None, is_ca=False):
    with open(os.path.join(d, name + ".ext"), "w") as f:
        if is_ca:
            f.write("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n")
        else:
            f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n")
            if san:
                f.write("subjectAltName=%s\n" % san)
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", name + ".key", cwd=d)
    _openssl("req", "-new", "-key", name + ".key", "-subj", "/CN=" + subject, "-out",
             name + ".csr", cwd=d)
    signer = (["-signkey", name + ".key"] if ca is None else
              ["-CA", ca + ".crt", "-CAkey", ca + ".key", "-CAcreateserial"])
    _openssl("x509", "-req", "-in", name + ".csr", *signer, "-days", "2", "-extfile",
             name + ".ext", "-out", name + ".crt", cwd=d)
    return os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    d = str(tmp_path_factory.mktemp("certs"))
    ca, _ = _cert(d, "ca", "test CA", is_ca=True)
    server = _cert(d, "server", "localhost", ca="ca", san="DNS:localhost,IP:127.0.0.1")
    client = _cert(d, "client", "test client", ca="ca")
    return {"ca": ca, "server": server, "client": client, "dir": d}


@pytest.fixture(scope="module")
def secure_server(certs):
    tokens = os.path.join(certs["dir"], "tokens")
    with open(tokens, "w") as f:
        f.write("alice %s max_sessions=3\nbob %s\n" % (ALICE, BOB))
    server = _start({"activation_dtype": "fp32", "tls_cert_file": certs["server"][0],
                     "tls_key_file": certs["server"][1], "tls_client_ca_file": certs["ca"],
                     "tokens_file": tokens})
    yield server
    server.stop()


def _client(server, certs, token, **kwargs):
    return gdn_serve.Client(server.address, root_certificates=certs["ca"],
                            certificate_chain=certs["client"][0],
                            private_key=certs["client"][1], token=token, timeout=30, **kwargs)


def test_tls_and_token_reach_the_server(secure_server, certs):
    with _client(secure_server, certs, ALICE) as c:
        assert c.config.num_layers > 0
        with c.session() as s:
            rng = np.random.default_rng(0)
            q, k = rng.standard_normal((2, 1, c.config.num_qk_heads, c.config.head_dim_k),
                                       dtype=np.float32)
            v = rng.standard_normal((1, c.config.num_v_heads, c.config.head_dim_v),
                                    dtype=np.float32)
            g = np.full((1, c.config.num_v_heads), -0.1, np.float32)
            o = s.forward(0, q, k, v, g, np.full_like(g, 0.5))
            assert o.shape == (1, c.config.num_v_heads, c.config.head_dim_v)


def test_missing_or_unknown_token_is_unauthenticated(secure_server, certs):
    for token in (None, "not-a-known-token-0000"):
        with _client(secure_server, certs, token) as c:
            with pytest.raises(gdn_serve.errors.GdnError) as e:
                c.create_session("x")
            assert e.value.code.name == "UNAUTHENTICATED"


def test_mutual_tls_needs_the_client_certificate(secure_server, certs):
    with gdn_serve.Client(secure_server.address, root_certificates=certs["ca"], token=ALICE,
                          timeout=10, retry=gdn_serve.retry.NO_RETRY) as c:
        with pytest.raises(gdn_serve.errors.GdnError):
            c.create_session("no-cert")


def test_tenants_see_only_their_own_sessions(secure_server, certs):
    with _client(secure_server, certs, ALICE) as alice, _client(secure_server, certs, BOB) as bob:
        alice.create_session("shared-name")
        with pytest.raises(gdn_serve.errors.GdnError) as e:
            bob.describe_session("shared-name")
        assert e.value.code.name == "NOT_FOUND"
        assert "alice" not in str(e.value)
        bob.create_session("shared-name")  # bob's own, no conflict
        assert alice.list_sessions() == ["shared-name"]
        assert bob.list_sessions() == ["shared-name"]
        alice.close_session("shared-name")
        bob.close_session("shared-name")


def test_quota_names_itself(secure_server, certs):
    with _client(secure_server, certs, ALICE) as alice:
        for i in range(3):
            alice.create_session("q%d" % i)
        with pytest.raises(gdn_serve.errors.GdnError) as e:
            alice.create_session("q3")
        assert e.value.code.name == "RESOURCE_EXHAUSTED"
        assert "max_sessions" in str(e.value)
        for i in range(3):
            alice.close_session("q%d" % i)


def test_asyncio_client_with_tls_and_token(secure_server, certs):
    async def run():
        async with gdn_serve.aio.Client(secure_server.address, root_certificates=certs["ca"],
                                         certificate_chain=certs["client"][0],
                                         private_key=certs["client"][1], token=BOB,
                                         timeout=30) as c:
            await c.create_session("async-one")
            ids = await c.list_sessions()
            await c.close_session("async-one")
            return ids
    assert asyncio.run(run()) == ["async-one"]
