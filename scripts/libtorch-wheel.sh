#!/usr/bin/env bash
# Makes sure the LibTorch of PyPI's `torch` wheel, version $1 (e.g. 2.11.0), is installed in
# a virtual environment of mpify's own, and prints the folder to give CMake as
# CMAKE_PREFIX_PATH. Safe to run again, and from several clones at once: every clone on the
# machine shares one environment per version, under ${XDG_CACHE_HOME:-~/.cache}/mpify, as the
# wheel with its NVIDIA libraries is several GB. Nothing goes into the system's Python.
#
#   scripts/libtorch-wheel.sh 2.11.0     # prints .../torch-2.11.0/lib/python3.X/site-packages/torch/share/cmake
set -euo pipefail

version=${1:?usage: scripts/libtorch-wheel.sh VERSION (e.g. 2.11.0)}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mpify
venv=$cache/torch-$version
complete=$venv/.mpify-complete   # written last: an environment without it is redone

say() { echo "mpify: $*" >&2; }

# The wheel's LibTorch: where its CMake files are, and that its parts are all there.
prefix_of() {
  local torch
  torch=$(echo "$venv"/lib/python3*/site-packages/torch)
  for part in share/cmake/Torch/TorchConfig.cmake lib/libtorch_cpu.so lib/libc10.so include/torch/csrc/api/include/torch/version.h; do
    [ -e "$torch/$part" ] || { say "$venv lacks torch/$part"; return 1; }
  done
  echo "$torch/share/cmake"
}

mkdir -p "$cache"
exec 8>"$cache/torch-$version.lock"
flock 8   # another clone installing the same version: wait for it

if [ -e "$complete" ] && prefix_of >/dev/null 2>&1; then
  prefix_of
  exit 0
fi

python=$(command -v python3 || true)
[ -n "$python" ] || { say "no python3 on PATH: install Debian's python3 and python3-venv"; exit 1; }
say "installing torch==$version from PyPI into $venv (several GB, once per machine)"
rm -rf "$venv"
if ! "$python" -m venv "$venv" >&2; then
  say "could not create a virtual environment with $python: install Debian's python3-venv"
  rm -rf "$venv"
  exit 1
fi
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check "torch==$version" >&2; then
  say "pip could not install torch==$version (is PyPI reachable? is that version on it?); nothing was kept"
  rm -rf "$venv"
  exit 1
fi
prefix_of >/dev/null || { say "the torch==$version wheel has no usable LibTorch; nothing was kept"; rm -rf "$venv"; exit 1; }
touch "$complete"
prefix_of
