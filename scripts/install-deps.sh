#!/usr/bin/env bash
# Installs the Debian packages mpify needs, if any is missing. Safe to run again.
#   scripts/install-deps.sh [library|example|notebook|all]
# library: what building and installing the libraries needs; example: and the examples
# (./run example, ./run smoke); notebook: and the Jupyter kernel (./run notebook); all
# (the default): and everything the test suite runs (./run test).
set -euo pipefail

what=${1:-all}
library=(
  build-essential cmake pkg-config
  libtorch-dev libgloo-dev             # LibTorch 1.13 (CPU, c10d + Gloo)
  libboost-dev libboost-serialization-dev libfmt-dev
  libsodium-dev                        # the secret and proofs of connect-back
  libdw-dev                            # mpify-stacks: where a hung rank is (elfutils)
  zlib1g-dev                           # the Learner's pictures (PNG)
)
example=(
  dataset-fashion-mnist                # the examples' data
  python3 python3-venv                 # python3-venv: the LibTorch 2.x wheels (scripts/libtorch-wheel.sh)
)
notebook=(
  # The Jupyter kernel (kernel/): the protocol (xeus), clang's interpreter, and the
  # Jupyter parts that run it (with /usr/bin/python3)
  xeus-dev nlohmann-json3-dev libclang-19-dev libclang-cpp19-dev llvm-19-dev
  jupyter-notebook python3-jupyter-client python3-nbclient python3-ipykernel
)
tests=(
  catch2
  chromium chromium-driver python3-selenium   # the notebook test in a real browser
  # Several machines: namespaces as hosts, and the launchers run for real in the tests
  iproute2 slurm-wlm munge openmpi-bin openssh-client openssh-server
  clang-19 libclang-rt-19-dev          # the sanitizer builds, and libFuzzer for the decoders' fuzz targets
  ccache                               # one compiler cache for the builds of a clone (./run)
  clang-format-19                      # the style check (scripts/check-format.sh)
  doxygen                              # the API reference (scripts/reference.py)
)
case "$what" in
  library) packages=("${library[@]}") ;;
  example) packages=("${library[@]}" "${example[@]}") ;;
  notebook) packages=("${library[@]}" "${example[@]}" "${notebook[@]}") ;;
  all) packages=("${library[@]}" "${example[@]}" "${notebook[@]}" "${tests[@]}") ;;
  *) echo "usage: $0 [library|example|notebook|all]" >&2; exit 2 ;;
esac

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
