#!/usr/bin/env bash
# Runs clang-tidy with the repository's .clang-tidy over mpify's own sources (src/ by
# default). It configures build-tidy/ (configure only, no build) without unity batches, so
# that every file has its own entry in compile_commands.json. Exits non-zero on a finding.
#   scripts/run-clang-tidy.sh [FILE...]
set -euo pipefail
cd "$(dirname "$0")/.."
tidy=$(command -v clang-tidy-19 || command -v clang-tidy || true)
[ -n "$tidy" ] || { echo "clang-tidy is not installed (Debian: clang-tidy)"; exit 2; }
cmake -S . -B build-tidy -DMPIFY_UNITY_BUILD=OFF -DMPIFY_BUILD_TESTS=OFF -DMPIFY_BUILD_EXAMPLES=OFF \
      -DMPIFY_BUILD_BENCHMARKS=OFF -DMPIFY_BUILD_KERNEL=OFF >/dev/null
files=("$@")
[ ${#files[@]} -gt 0 ] || mapfile -t files < <(git ls-files 'src/*.cpp')
status=0
for file in "${files[@]}"; do
  "$tidy" -p build-tidy --quiet "$file" 2>/dev/null || { echo "clang-tidy: findings in $file"; status=1; }
done
exit $status
