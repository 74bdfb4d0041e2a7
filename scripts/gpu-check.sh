#!/usr/bin/env bash
# The GPU check: builds mpify against the LibTorch of a machine's Python PyTorch and runs
# the tests labelled `gpu` (ctest -L gpu), on a machine with an NVIDIA GPU, PyTorch 2.x,
# CMake and a C++ compiler but no network and no Debian development packages.
#
#   scripts/gpu-check.sh download [FOLDER]
#       On a Debian 12 machine with its package archive (once, beforehand): fetches the
#       Debian packages mpify needs besides LibTorch into FOLDER (default
#       .gpu-check/packages; at most 40 MiB) with `apt-get download`. Nothing is installed.
#   scripts/gpu-check.sh [--packages FOLDER] [--python PYTHON] [--build DIR] [--jobs N]
#       On the GPU machine: unpacks the packages into DIR/deps (a private folder; nothing
#       outside DIR is written), builds mpify's libraries and GPU tests in DIR (default
#       .gpu-check/build) against PYTHON's torch (default python3), runs `ctest -L gpu`
#       and prints a table of the tests. Without a GPU the same steps run and each GPU test
#       is reported skipped ("skipped: no GPU"): a dry run of the whole check.
# Exits non-zero when a step or a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# What mpify's libraries and tests need from Debian (LibTorch comes from the Python
# PyTorch): Boost.Serialization, fmt, libsodium, elfutils' libdw (and what its pkg-config
# file names), zlib, Catch2, and pkgconf to read their .pc files.
packages=(
  libboost1.74-dev libboost-serialization1.74-dev libboost-serialization1.74.0
  libfmt-dev libfmt9 libsodium-dev libsodium23
  libdw-dev libdw1 libelf-dev libelf1 zlib1g-dev liblzma-dev libbz2-dev libzstd-dev
  catch2 pkgconf pkgconf-bin libpkgconf3
)
most_bytes=$((40 * 1024 * 1024))

if [ "${1:-}" = download ]; then
  folder=${2:-.gpu-check/packages}
  mkdir -p "$folder"
  sandbox=()  # as root, apt's download user cannot write to the folder: download as root
  [ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)
  (cd "$folder" && apt-get "${sandbox[@]}" download "${packages[@]}" >/dev/null)
  bytes=$(du -cb "$folder"/*.deb | tail -1 | cut -f1)
  echo "gpu-check: ${#packages[@]} packages, $((bytes / 1024 / 1024)) MiB, in $folder"
  if [ "$bytes" -gt "$most_bytes" ]; then echo "gpu-check: more than 40 MiB" >&2; exit 1; fi
  exit 0
fi

packages_dir=.gpu-check/packages
python=python3
build=.gpu-check/build
jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --packages) packages_dir=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "usage: $0 download [FOLDER] | $0 [--packages FOLDER] [--python PYTHON] [--build DIR] [--jobs N]" >&2
       exit 2 ;;
  esac
done
started=$SECONDS
step() { echo "gpu-check: [$((SECONDS - started)) s] $*"; }

for p in "${packages[@]}"; do
  compgen -G "$packages_dir/${p}_*.deb" >/dev/null || {
    echo "gpu-check: $packages_dir has no $p; run '$0 download' where Debian's archive is reachable" >&2; exit 1; }
done

# The packages, unpacked with Python (no dpkg needed): a .deb is an ar archive holding
# data.tar.*.
mkdir -p "$build"
build=$(cd "$build" && pwd)
deps=$build/deps
rm -rf "$deps" && mkdir -p "$deps"
step "unpacking ${#packages[@]} packages into $deps"
"$python" - "$deps" "$packages_dir"/*.deb <<'EOF'
import io, sys, tarfile
target = sys.argv[1]
for deb in sys.argv[2:]:
    data = open(deb, "rb").read()
    assert data[:8] == b"!<arch>\n", deb + " is not a .deb"
    at = 8
    while at < len(data):
        name = data[at:at + 16].decode().strip().rstrip("/")
        size = int(data[at + 48:at + 58].decode().strip())
        body = data[at + 60:at + 60 + size]
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(body)) as tar:
                tar.extractall(target, filter="tar") if hasattr(tarfile, "data_filter") else tar.extractall(target)
        at += 60 + size + (size % 2)
EOF
libdir=$deps/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_LIBDIR=$libdir/pkgconfig:$deps/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$deps   # the .pc files say /usr: read it as $deps/usr

read -r torch_prefix torch_version gpus < <("$python" -W ignore -c \
  'import torch; print(torch.utils.cmake_prefix_path, torch.__version__, torch.cuda.device_count())' 2>/dev/null)
[ -n "${gpus:-}" ] || { echo "gpu-check: $python cannot import torch" >&2; exit 1; }
step "configuring against torch $torch_version ($gpus GPU(s) seen by its Python)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$deps/usr;$libdir/cmake" -DZLIB_ROOT="$deps/usr" \
  -DPKG_CONFIG_EXECUTABLE="$deps/usr/bin/pkgconf" -DBoost_NO_SYSTEM_PATHS=ON \
  -DMPIFY_BUILD_EXAMPLES=OFF -DMPIFY_BUILD_BENCHMARKS=OFF -DMPIFY_BUILD_KERNEL=OFF -DMPIFY_BUILD_LEARNER=ON \
  -DMPIFY_TORCH_PYTHON="$(command -v "$python")" >"$build/configure.log" 2>&1 ||
  { tail -30 "$build/configure.log"; exit 1; }

step "building (-j$jobs)"
cmake --build "$build" -j "$jobs" --target mpify-worker mpify_gpu_tests mpify_test_cuda_used_caller \
  >"$build/build.log" 2>&1 || { grep -E "error|Error" "$build/build.log" | head -30; exit 1; }

step "running ctest -L gpu"
status=0
(cd "$build" && ctest -L gpu --output-on-failure -j 1 --output-junit gpu-tests.xml >ctest.log 2>&1) || status=$?

# The table: each test, how it ended, its time; a skip's reason from its output.
"$python" - "$build/gpu-tests.xml" <<'EOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
rows = []
for case in root.iter("testcase"):
    state = case.get("status", "run")
    if case.find("failure") is not None:
        state = "FAILED"
    elif case.find("skipped") is not None or state == "notrun" or state == "disabled":
        state = "skipped"
    elif state == "run":
        state = "passed"
    output = (case.findtext("system-out") or "")
    reason = next((line.strip() for line in output.splitlines() if line.strip().startswith("skipped:")), "")
    rows.append((case.get("name"), state, float(case.get("time", "0")), reason))
width = max(len(r[0]) for r in rows) if rows else 10
print(f"{'test':<{width}}  {'result':<8} {'seconds':>8}  note")
for name, state, seconds, reason in rows:
    print(f"{name:<{width}}  {state:<8} {seconds:>8.1f}  {reason}")
EOF
step "done (ctest exit $status; its log: $build/ctest.log)"
exit "$status"
