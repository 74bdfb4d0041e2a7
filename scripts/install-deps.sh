#!/usr/bin/env bash
# Installs the Debian packages mpify needs, if any is missing. Safe to run again.
set -euo pipefail

packages=(
  build-essential cmake
  libtorch-dev libgloo-dev             # LibTorch 1.13 (CPU, c10d + Gloo)
  libboost-dev libboost-serialization-dev libboost-filesystem-dev
  libfmt-dev catch2 libbenchmark-dev zlib1g-dev
  pkg-config libsodium-dev             # the secret and proofs of connect-back
  libdw-dev                            # mpify-stacks: where a hung rank is (elfutils)
  dataset-fashion-mnist                # examples
  # The Jupyter kernel (kernel/): the protocol (xeus), clang's interpreter, and the
  # Jupyter parts that run and test it (with /usr/bin/python3)
  python3 python3-venv                # python3-venv: the LibTorch 2.x wheels (scripts/libtorch-wheel.sh)
  xeus-dev nlohmann-json3-dev libclang-19-dev libclang-cpp19-dev llvm-19-dev
  jupyter-notebook python3-jupyter-client python3-nbclient python3-ipykernel
  chromium chromium-driver python3-selenium   # the notebook test in a real browser
  # Several machines: namespaces as hosts, and the launchers run for real in the tests
  iproute2 slurm-wlm munge openmpi-bin openssh-client openssh-server
  clang-19 libclang-rt-19-dev          # libFuzzer, for the decoders' fuzz targets
  clang-format-19                      # the style check (scripts/check-format.sh)
  doxygen                              # the API reference (scripts/reference.py)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "mpify: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
