#!/usr/bin/env bash
# Builds tests/consumer with mpify's source folder added by add_subdirectory, as a host
# project would, and runs the consumer. Inside a host, mpify must build only the library
# and its worker (no tests, examples or benchmarks) and force no setting on the host.
# The consumer links mpify::core and only its targets are built: how a host adds mpify
# does not depend on LibTorch, and compiling mpify's LibTorch half a second time took
# over three minutes of CI (the installed-package test links the whole of mpify).
#   $1 (optional) the folder of the TorchConfig.cmake this build used: the host finds that LibTorch.
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/.." && pwd)
torch_dir=${1:-}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

cmake -S "$source_dir/tests/consumer" -B "$scratch/build" -DMPIFY_SOURCE_DIR="$source_dir" \
      -DMPIFY_CONSUMER_LINKS=mpify::core ${torch_dir:+-DTorch_DIR="$torch_dir"} >/dev/null
cache=$scratch/build/CMakeCache.txt
grep -q '^MPIFY_BUILD_TESTS:BOOL=OFF' "$cache" || { echo "tests are on in a host project"; exit 1; }
grep -q '^MPIFY_BUILD_EXAMPLES:BOOL=OFF' "$cache" || { echo "examples are on in a host project"; exit 1; }
grep -q '^MPIFY_BUILD_BENCHMARKS:BOOL=OFF' "$cache" || { echo "benchmarks are on in a host project"; exit 1; }
grep -q '^CMAKE_BUILD_TYPE:STRING=$' "$cache" || { echo "mpify forced the host's build type"; exit 1; }
cmake --build "$scratch/build" -j 2 --target consumer mpify-worker >/dev/null
[ -x "$scratch/build/consumer" ] || { echo "the host's program is not where the host put it"; exit 1; }
output=$("$scratch/build/consumer")
echo "$output"
grep -q "consumer: ranch(2) = 42 43" <<<"$output"
grep -q "consumer: library host ok" <<<"$output"
