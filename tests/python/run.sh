#!/usr/bin/env bash
# ctest python_client: installs the gpsel package as a user would (`pip install ./python`, offline,
# into a venv with Debian's python3-grpcio/protobuf/numpy/pandas) and runs its unit tests and its
# tests against a live gpsel-server on loopback.
#   tests/python/run.sh SOURCE_DIR BUILD_DIR
# Exit 77 (skipped) without python3-venv, grpcio, pandas or the protoc plugin.
set -euo pipefail
source_dir=$1
build_dir=$2
python=/usr/bin/python3
[ -x "$python" ] || python=python3
for module in venv grpc google.protobuf numpy pandas setuptools; do
  if ! "$python" -c "import $module" 2>/dev/null; then
    echo "SKIP: python module $module missing (scripts/install-deps.sh installs it)"
    exit 77
  fi
done
if ! command -v grpc_python_plugin >/dev/null; then
  echo "SKIP: grpc_python_plugin missing (apt-get install protobuf-compiler-grpc)"
  exit 77
fi
venv=$build_dir/python-venv
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
# In-tree build: setup.py writes python/build and python/gpsel.egg-info; build in a copy so the
# source tree stays clean and parallel runs cannot clash.
stage=$build_dir/python-src
rm -rf "$stage"
mkdir -p "$stage"
cp -r "$source_dir/python" "$stage/"
GPSEL_PROTO_DIR=$source_dir/proto "$venv/bin/pip" install --no-index --quiet \
  --disable-pip-version-check "$stage/python"
cd "$build_dir"
export GPSEL_SERVER=$build_dir/bin/gpsel-server GPSEL_CLI=$build_dir/bin/gpsel
export GPSEL_DATA_DIR=$source_dir/data
"$venv/bin/python" "$source_dir/tests/python/conversions_test.py" -v 2>&1
"$venv/bin/python" "$source_dir/tests/python/live_test.py" -v 2>&1
