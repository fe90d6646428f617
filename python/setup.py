# The gpsel Python package (import name `gpsel`): a client of gpsel-server for numpy/pandas users.
#
#   pip install ./python          (inside a venv made with --system-site-packages on Debian,
#                                  which brings python3-grpcio and python3-protobuf)
#
# Plain setuptools without pyproject.toml on purpose: pip then builds with the installed
# setuptools instead of fetching a build environment, so the install works offline.
#
# The gRPC/protobuf modules are generated here, at build time, from the repository's proto/
# (never committed, never edited): Debian's `protoc` writes the messages and its
# `grpc_python_plugin` the service stubs (protobuf-compiler, protobuf-compiler-grpc — the C++
# build's own generators; grpc_tools is not needed). They go to gpsel/_proto/, a private package,
# so that google/rpc/*.proto do not claim the top-level `google.rpc` of other installs; the
# generated imports are pointed there by the one rewrite below.
import os
import re
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.environ.get("GPSEL_PROTO_DIR", os.path.join(HERE, "..", "proto"))
# The .proto files the client needs: the service, its messages, and google.rpc error details.
PROTO_FILES = [
    "gpsel/v1/types.proto",
    "gpsel/v1/job.proto",
    "gpsel/v1/model_selection.proto",
    "google/rpc/status.proto",
    "google/rpc/error_details.proto",
    "google/rpc/code.proto",
]
GRPC_FILES = ["gpsel/v1/model_selection.proto"]
# `from gpsel.v1 import x_pb2` -> `from gpsel._proto.gpsel.v1 import x_pb2` (same for google.rpc).
IMPORT = re.compile(r"^from (gpsel\.v1|google\.rpc) import ", re.MULTILINE)


def find_tool(name, env):
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        sys.exit(f"gpsel setup: '{name}' not found (apt-get install protobuf-compiler "
                 f"protobuf-compiler-grpc), or set {env}")
    return path


def generate(out_root):
    protoc = find_tool("protoc", "GPSEL_PROTOC")
    plugin = find_tool("grpc_python_plugin", "GPSEL_GRPC_PYTHON_PLUGIN")
    out = os.path.join(out_root, "gpsel", "_proto")
    os.makedirs(out, exist_ok=True)
    for missing in [f for f in PROTO_FILES if not os.path.exists(os.path.join(PROTO_DIR, f))]:
        sys.exit(f"gpsel setup: {missing} not under {PROTO_DIR} (set GPSEL_PROTO_DIR)")
    subprocess.check_call([protoc, f"-I{PROTO_DIR}", f"--python_out={out}"] + PROTO_FILES)
    subprocess.check_call([protoc, f"-I{PROTO_DIR}", f"--grpc_python_out={out}",
                           f"--plugin=protoc-gen-grpc_python={plugin}"] + GRPC_FILES)
    for folder, _, files in os.walk(out):
        init = os.path.join(folder, "__init__.py")
        if not os.path.exists(init):
            open(init, "w").close()
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path) as f:
                    text = f.read()
                rewritten = IMPORT.sub(r"from gpsel._proto.\1 import ", text)
                if rewritten != text:
                    with open(path, "w") as f:
                        f.write(rewritten)


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        generate(self.build_lib)


setup(
    name="gpsel",
    version="0.1.0",
    description="Python client of gpsel-server: Gaussian-process kernel selection "
                "(Laplace, BIC, nested sampling) from numpy and pandas",
    packages=["gpsel"],
    python_requires=">=3.9",
    install_requires=["grpcio", "protobuf", "numpy"],
    extras_require={"pandas": ["pandas"]},
    cmdclass={"build_py": BuildWithStubs},
)
