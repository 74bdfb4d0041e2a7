#!/usr/bin/env bash
# Builds the libFuzzer targets with clang++-19 into BUILD_DIR and runs each for SECONDS
# from its seed corpus (tests/fuzz/corpus/<target>, copied: the seeds stay as they are).
# Fails when a target finds a crash, a leak or an overlong allocation (its input is kept
# in BUILD_DIR/findings). Exits 77 (ctest: skipped) without clang++-19 and libFuzzer.
#   tests/fuzz/run_fuzzers.sh build/fuzz 6               (what ./run test does)
#   tests/fuzz/run_fuzzers.sh build/fuzz 600 channel_fuzzer
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1
seconds=$2
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(store_message_fuzzer hostlist_fuzzer channel_fuzzer template_protocol_fuzzer \
                                  launcher_environment_fuzzer result_fuzzer remote_link_fuzzer stack_dump_fuzzer \
                                  checkpoint_fuzzer)

if ! command -v clang++-19 >/dev/null || ! ls /usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer-x86_64.a \
    >/dev/null 2>&1; then
  echo "SKIPPED: clang++-19 and libclang-rt-19-dev (libFuzzer) are needed"
  exit 77
fi
cmake -S "$here" -B "$build" -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "${MPIFY_JOBS:-2}" --target "${targets[@]}" >/dev/null

status=0
mkdir -p "$build/findings"
for target in "${targets[@]}"; do
  corpus=$(mktemp -d)
  cp "$here/corpus/$target"/* "$corpus"/ 2>/dev/null || true
  log="$build/$target.log"
  # -rss_limit_mb / -malloc_limit_mb: an allocation the input does not justify is a finding.
  if "$build/$target" "$corpus" -max_total_time="$seconds" -rss_limit_mb=1024 -malloc_limit_mb=256 \
       -artifact_prefix="$build/findings/$target-" -print_final_stats=1 >"$log" 2>&1; then
    echo "$target: $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs," \
         "$(grep -oE 'cov: [0-9]+' "$log" | tail -1) edges, $(ls "$corpus" | wc -l) inputs in the corpus, no finding"
  else
    echo "$target: FINDING (input in $build/findings/):"
    grep -E "ERROR|SUMMARY|==[0-9]+==" "$log" | head -5
    status=1
  fi
  rm -rf "$corpus"
done
exit $status
