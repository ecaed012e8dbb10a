"""Fixtures: gdn-server processes (cpu backend, a small shape) on free ports.

$GDN_SERVER names the gdn-server binary (tests/client/python/run_pytest.sh
sets it); without it, tests that need a server are skipped. One server per
configuration, started on first use and stopped at the end of the run:

    server_bf16    direct gating, bf16 activations (the server's defaults)
    server_fused   fused gating (a, b, A_log, dt_bias), bf16
    server_fp32    direct gating, fp32 activations
    server_fp16    direct gating, fp16 activations

Shape of all: 3 layers, Hqk 2, Hv 4 (GVA, G = 2), K = V = 64.
"""

import os
import select
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # tests/reference.py, tests/inputs.py

SHAPE = {"layers": 3, "qk_heads": 2, "v_heads": 4, "head_dim_k": 64, "head_dim_v": 64}


class ServerProcess:
    """A running gdn-server; `address` is its grpc HOST:PORT."""

    def __init__(self, binary: str, flags: dict):
        args = [binary] + ["--%s=%s" % kv for kv in sorted(flags.items())]
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr)
        line = self._read_line(timeout=60)
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if not line.startswith("gdn-server listening") or "grpc" not in words:
            self.stop()
            raise RuntimeError("gdn-server did not start (%s): %r\n%s"
                               % (" ".join(args), line, self.stderr_tail()))
        self.address = words["grpc"]

    def _read_line(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        out = b""
        fd = self.process.stdout.fileno()
        while b"\n" not in out and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                out += chunk
        return out.split(b"\n", 1)[0].decode(errors="replace")

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.stderr.close()


def _start(extra: dict):
    binary = os.environ.get("GDN_SERVER")
    if not binary:
        pytest.skip("GDN_SERVER (the gdn-server binary) is not set")
    flags = {"backend": "cpu", "cpu_threads": 1, "listen": "127.0.0.1:0",
             "metrics_listen": "127.0.0.1:0", "max_queue_delay_us": 100, "drain_timeout_s": 1}
    flags.update(SHAPE)
    flags.update(extra)
    return ServerProcess(binary, flags)


def _server_fixture(extra: dict):
    @pytest.fixture(scope="session")
    def fixture():
        server = _start(extra)
        yield server
        server.stop()
    return fixture


server_bf16 = _server_fixture({"activation_dtype": "bf16"})
server_fused = _server_fixture({"activation_dtype": "bf16", "gating": "fused"})
server_fp32 = _server_fixture({"activation_dtype": "fp32"})
server_fp16 = _server_fixture({"activation_dtype": "fp16"})


@pytest.fixture
def client(server_bf16):
    """A sync client of the bf16 server."""
    import gdn_serve
    with gdn_serve.Client(server_bf16.address, timeout=60) as c:
        yield c


@pytest.fixture(params=["bf16", "fp16", "fp32"])
def any_dtype_client(request):
    """A sync client of each activation dtype's server (direct gating)."""
    import gdn_serve
    server = request.getfixturevalue("server_" + request.param)
    with gdn_serve.Client(server.address, timeout=60) as c:
        yield c
