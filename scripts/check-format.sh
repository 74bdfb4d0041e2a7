#!/usr/bin/env bash
# Checks that the tracked C++ files follow .clang-format (clang-format-19, as Debian packages it).
#   scripts/check-format.sh         list the files that are not formatted; exit 1 if there are any
#   scripts/check-format.sh --fix   format them in place
set -euo pipefail

usage() { echo "usage: $0 [--fix]" >&2; }

fix=0
case $# in
  0) ;;
  1)
    case $1 in
      --fix) fix=1 ;;
      -h | --help) usage; exit 0 ;;
      *) usage; exit 2 ;;
    esac
    ;;
  *) usage; exit 2 ;;
esac

formatter=clang-format-19
if ! command -v "$formatter" > /dev/null 2>&1; then
  echo "$0: $formatter is missing; install it (Debian: apt-get install clang-format-19)" >&2
  exit 1
fi

# The tracked files: outside a git checkout (an unpacked archive) there is nothing to
# check against, which the test suite counts as skipped (77).
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null) || {
  echo "$0: not in a git checkout; nothing checked" >&2
  exit 77
}
cd "$root"
if ! "$formatter" --style=file --assume-filename=check.cpp --dump-config > /dev/null; then
  echo "$0: $formatter cannot read the style in .clang-format" >&2
  exit 1
fi

files=()
while IFS= read -r -d '' file; do
  case $file in
    tests/fuzz/corpus/*) continue ;;
  esac
  [[ -f $file ]] && files+=("$file")
done < <(git ls-files -z -- '*.cpp' '*.hpp' '*.h')

if ((fix)); then
  if ((${#files[@]})); then
    printf '%s\0' "${files[@]}" | xargs -0 "$formatter" --style=file -i
  fi
  echo "formatted ${#files[@]} files"
  exit 0
fi

unformatted=()
for file in "${files[@]}"; do
  if ! "$formatter" --style=file --dry-run --Werror "$file" > /dev/null 2>&1; then
    unformatted+=("$file")
  fi
done

if ((${#unformatted[@]})); then
  echo "${#unformatted[@]} of ${#files[@]} files are not formatted (fix: $0 --fix):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "all ${#files[@]} files are formatted"
