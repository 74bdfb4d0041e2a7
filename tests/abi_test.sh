#!/usr/bin/env bash
# A program built against this mpify is refused by an mpify of another minor version, at
# link time and at load time.
#   $1 the consumer's object file (tests/abi/consumer.cpp, this version's headers)
#   $2 the consumer program, linked against this libmpify.so (run with LD_LIBRARY_PATH)
#   $3 this version's libmpify.so   $4 the next minor version's stand-in (other_minor.cpp)
#   $5 the C++ compiler
set -euo pipefail
consumer_object=$1 consumer=$2 this_library=$3 other_library=$4 compiler=$5
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
this_soname=$(readelf -d "$this_library" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
other_soname=$(readelf -d "$other_library" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
echo "this library: $this_soname; the other minor version: $other_soname"
[ -n "$this_soname" ] && [ -n "$other_soname" ] && [ "$this_soname" != "$other_soname" ] ||
  { echo "FAIL: the two minor versions must have different sonames"; exit 1; }

# The baseline: the consumer runs against the library it was built for.
LD_LIBRARY_PATH=$(dirname "$this_library") "$consumer" | grep -q "abi consumer: loaded" ||
  { echo "FAIL: the consumer does not run against its own version"; exit 1; }

# Link time: this version's headers name mpify::v<major>_<minor>::restart_count(), which
# the other version does not define.
if "$compiler" "$consumer_object" "$other_library" -o "$scratch/linked" 2>"$scratch/link.log"; then
  echo "FAIL: the consumer linked against another minor version"; exit 1
fi
grep -q "undefined reference to .mpify::v[0-9_]*::restart_count()" "$scratch/link.log" ||
  { echo "FAIL: the link failed for another reason:"; cat "$scratch/link.log"; exit 1; }
echo "link time: refused ($(grep -m1 'undefined reference' "$scratch/link.log" | sed 's/.*: //'))"

# Load time: the other version's file put where this version's soname is looked for (a
# wrong copy or a broken package): the loader refuses it by the version node.
cp "$other_library" "$scratch/$this_soname"
if LD_LIBRARY_PATH=$scratch "$consumer" >"$scratch/run.log" 2>&1; then
  echo "FAIL: the consumer ran with another minor version's library:"; cat "$scratch/run.log"; exit 1
fi
grep -q "version .MPIFY_[0-9.]*' not found" "$scratch/run.log" ||
  { echo "FAIL: the load failed for another reason:"; cat "$scratch/run.log"; exit 1; }
echo "load time: refused ($(head -1 "$scratch/run.log"))"
