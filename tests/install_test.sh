#!/usr/bin/env bash
# Installs the build into a scratch prefix, builds tests/consumer against it with
# find_package(mpify), and runs the consumer (which ranches a function on 2 processes).
set -euo pipefail
build_dir=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

cmake --install "$build_dir" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source_dir/consumer" -B "$scratch/build" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/build" -j 2 >/dev/null
# The consumer must run from the installed files alone: hide the build tree's worker.
output=$("$scratch/build/consumer")
echo "$output"
grep -q "consumer: ranch(2) = 42 43" <<<"$output"
grep -q "consumer: library host ok" <<<"$output"

# load_source in an installed mpify compiles with the installed headers, and never with
# the trees mpify was built from (which may have changed, or be gone).
echo '#error deliberately broken' >"$scratch/broken.cpp"
command=$("$scratch/build/consumer" "$scratch/broken.cpp" | grep '^command: ')
repository=$(cd "$source_dir/.." && pwd)
grep -q -- "-I$(realpath "$scratch/prefix/include")" <<<"$command" || { echo "not the installed headers: $command"; exit 1; }
if grep -q -- "-I$repository" <<<"$command"; then echo "source or build tree headers: $command"; exit 1; fi
