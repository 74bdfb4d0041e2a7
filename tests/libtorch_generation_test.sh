#!/usr/bin/env bash
# A program compiled against another LibTorch than this libmpify_torch's is refused at link
# time, by a message that names the LibTorch it was compiled against; compiled against this
# one, the same program links.
#   $1 the C++ compiler   $2 this build's libmpify_torch.so   $3 its libmpify.so
#   $4 the -std flag   $5 mpify's include flags   $6 this build's LibTorch's include flags
#   $7 the other LibTorch's include flags   $8 the other LibTorch's version, as major_minor
set -euo pipefail
compiler=$1 torch_part=$2 core=$3 standard=$4 mpify_flags=$5 own_flags=$6 other_flags=$7 other_version=$8
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cat >"$scratch/consumer.cpp" <<'PROGRAM'
#include <mpify/tensor.hpp>
int main() { return 0; }
PROGRAM
link() {  # $1 output, rest: compile flags; the libraries' own needs are not this test's
  local output=$1; shift
  # shellcheck disable=SC2068
  "$compiler" -D_GLIBCXX_USE_CXX11_ABI=1 $@ "$scratch/consumer.cpp" "$torch_part" "$core" \
    -Wl,--unresolved-symbols=ignore-in-shared-libs -o "$output"
}

# The baseline: compiled against this build's LibTorch, it links.
link "$scratch/own" "$standard" $mpify_flags $own_flags 2>"$scratch/own.log" ||
  { echo "FAIL: the consumer does not link against its own build:"; cat "$scratch/own.log"; exit 1; }

# Compiled against the other LibTorch (its headers first), it does not.
if link "$scratch/other" "$standard" $mpify_flags $other_flags 2>"$scratch/other.log"; then
  echo "FAIL: a program compiled against LibTorch ${other_version/_/.} linked against this libmpify_torch"; exit 1
fi
grep -q "undefined reference to .mpify_built_for_libtorch_${other_version}'" "$scratch/other.log" ||
  { echo "FAIL: the link failed for another reason:"; cat "$scratch/other.log"; exit 1; }
echo "refused: $(grep -m1 'undefined reference' "$scratch/other.log" | sed 's/.*: //')"
