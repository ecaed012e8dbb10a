"""Build hook of gdn_serve: generates the protobuf stubs of gdn.v1 at build time.

`pip install ./client/python` runs this with setuptools and grpcio-tools (the
build requirements of pyproject.toml). The stubs are written into the built
package only (build_lib/gdn_serve/_proto/), never into the source tree:

    gdn_serve/_proto/gdn_pb2.py       messages of proto/gdn/v1/gdn.proto
    gdn_serve/_proto/gdn_pb2_grpc.py  the service stub (optional for users;
                                      gdn_serve itself does not import it)

The proto is found at $GDN_PROTO_DIR/gdn/v1/gdn.proto, else at
../../proto/gdn/v1/gdn.proto relative to this file (the repository layout).
setuptools' own build/ and egg-info folders go to a temporary folder too, so
a build leaves `git status` clean.

protobuf's lower bound in the package's dependencies is the version of the
generated code (protoc's "Protobuf Python Version"), so the runtime can load it.
"""

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_REL = os.path.join("gdn", "v1", "gdn.proto")


def proto_root():
    """The folder holding gdn/v1/gdn.proto; SystemExit with a clear message if none."""
    candidates = []
    if os.environ.get("GDN_PROTO_DIR"):
        candidates.append(os.environ["GDN_PROTO_DIR"])
    candidates.append(os.path.join(HERE, "..", "..", "proto"))
    for root in candidates:
        if os.path.isfile(os.path.join(root, PROTO_REL)):
            return os.path.abspath(root)
    raise SystemExit(
        "gdn_serve: cannot find %s under %s. Build the package from the gdn-serve "
        "repository (pip install ./client/python), or set GDN_PROTO_DIR to the "
        "folder that holds gdn/v1/gdn.proto." % (PROTO_REL, " or ".join(candidates)))


def generate_stubs(out_dir):
    """Runs grpc_tools.protoc into out_dir/gdn_serve/_proto; returns the gencode version."""
    try:
        import grpc_tools  # noqa: F401  (build requirement)
    except ImportError:
        raise SystemExit("gdn_serve: building needs grpcio-tools (pip install grpcio-tools)")
    root = proto_root()
    work = tempfile.mkdtemp(prefix="gdn_serve_protoc_")
    try:
        cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I" + root,
               "--python_out=" + work, "--grpc_python_out=" + work,
               os.path.join(root, PROTO_REL)]
        subprocess.run(cmd, check=True)
        target = os.path.join(out_dir, "gdn_serve", "_proto")
        os.makedirs(target, exist_ok=True)
        generated = os.path.join(work, "gdn", "v1")
        shutil.copyfile(os.path.join(generated, "gdn_pb2.py"), os.path.join(target, "gdn_pb2.py"))
        with open(os.path.join(generated, "gdn_pb2_grpc.py")) as f:
            grpc_stub = f.read()
        # protoc writes an absolute import of the proto's package path.
        grpc_stub = grpc_stub.replace("from gdn.v1 import gdn_pb2", "from . import gdn_pb2")
        with open(os.path.join(target, "gdn_pb2_grpc.py"), "w") as f:
            f.write(grpc_stub)
        with open(os.path.join(generated, "gdn_pb2.py")) as f:
            match = re.search(r"Protobuf Python Version: (\d+)\.(\d+)\.(\d+)", f.read())
        return match.groups() if match else None
    finally:
        shutil.rmtree(work, ignore_errors=True)


class BuildPyWithStubs(build_py):
    """build_py that also writes the generated stubs into build_lib."""

    def run(self):
        super().run()
        generate_stubs(self.build_lib)


def dependencies():
    scratch = tempfile.mkdtemp(prefix="gdn_serve_gencode_")
    try:
        version = generate_stubs(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    protobuf = "protobuf>=%s.%s" % version[:2] if version else "protobuf>=4.21"
    return ["grpcio>=1.60", protobuf, "numpy>=1.22"]


# setuptools' build/ and *.egg-info of this process, removed at exit.
_scratch = tempfile.mkdtemp(prefix="gdn_serve_build_")
atexit.register(shutil.rmtree, _scratch, True)
setup(
    install_requires=dependencies(),
    cmdclass={"build_py": BuildPyWithStubs},
    options={
        "build": {"build_base": os.path.join(_scratch, "build")},
        "egg_info": {"egg_base": _scratch},
    },
)
