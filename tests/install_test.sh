#!/usr/bin/env bash
# Installs the build into a scratch prefix, builds tests/consumer against it with
# find_package(mpify), and runs the consumer (which ranches a function on 2 processes);
# then again with find_package(mpify COMPONENTS core) and LibTorch made unfindable.
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

# The core component alone: configured with LibTorch unfindable, linked with mpify::core.
cmake -S "$source_dir/consumer" -B "$scratch/core-build" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
      -DCMAKE_BUILD_TYPE=Release -DMPIFY_CONSUMER_COMPONENTS=core -DMPIFY_CONSUMER_LINKS=mpify::core \
      -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON >/dev/null
cmake --build "$scratch/core-build" -j 2 >/dev/null
output=$("$scratch/core-build/consumer")
echo "core component: $output"
grep -q "consumer: ranch(2) = 42 43" <<<"$output"
if readelf -d "$scratch/core-build/consumer" | grep NEEDED | grep -q torch; then echo "the core-only consumer needs LibTorch"; exit 1; fi
# Asking for a component the package does not have fails, naming it.
if cmake -S "$source_dir/consumer" -B "$scratch/bad-build" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
      -DMPIFY_CONSUMER_COMPONENTS=gpu >"$scratch/bad.log" 2>&1; then
  echo "find_package(mpify COMPONENTS gpu) succeeded"; exit 1
fi
grep -q "gpu" "$scratch/bad.log" || { cat "$scratch/bad.log"; exit 1; }
