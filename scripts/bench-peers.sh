#!/usr/bin/env bash
# Makes a Python for the benchmarks that compare mpify with its Python peers
# (benchmarks/launch_bench.py, python_ddp_bench.py): PyPI's torch VERSION (the environment of
# scripts/libtorch-wheel.sh, reused through a .pth file rather than installed again), and
# pinned accelerate and multiprocess (what Python mpify needs). Prints its python. Safe to
# run again; nothing goes into the system's Python.
#
#   scripts/bench-peers.sh 2.11.0     # prints ~/.cache/mpify/peers-2.11.0/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:?usage: scripts/bench-peers.sh VERSION (e.g. 2.11.0)}
accelerate_version=1.15.0
multiprocess_version=0.70.19
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mpify
peers=$cache/peers-$version
complete=$peers/.mpify-complete

scripts/libtorch-wheel.sh "$version" >/dev/null
torch_site=$(echo "$cache/torch-$version"/lib/python3*/site-packages)
if [ ! -e "$complete" ]; then
  echo "mpify: installing accelerate==$accelerate_version and multiprocess==$multiprocess_version into $peers" >&2
  rm -rf "$peers"
  python3 -m venv "$peers" >&2
  site=$(echo "$peers"/lib/python3*/site-packages)
  echo "$torch_site" >"$site/torch-$version.pth"
  "$peers/bin/pip" install --quiet --disable-pip-version-check "torch==$version" \
    "accelerate==$accelerate_version" "multiprocess==$multiprocess_version" >&2
  touch "$complete"
fi
echo "$peers/bin/python"
