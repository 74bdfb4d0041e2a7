#!/usr/bin/env bash
# The bundled notebooks against an installed mpify, nothing of the build tree in reach:
# installs this build into a scratch prefix (its kernelspec too), builds the examples on
# their own against it (find_package(mpify COMPONENTS learner)) and installs their library
# beside mpify's, then runs collab.ipynb and own_functions.ipynb through the installed
# kernelspec, as a user's Jupyter would find it (JUPYTER_PATH=<prefix>/share/jupyter).
#   installed_notebooks_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
kernelspec=$prefix/share/jupyter/kernels/mpify-cpp17/kernel.json
if grep -q -e "$build" -e "$source" "$kernelspec"; then
  echo "the installed kernelspec names the build or source tree:"; cat "$kernelspec"; exit 1
fi
cmake -S "$source/examples" -B "$scratch/examples" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_INSTALL_PREFIX="$prefix" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$scratch/examples" -j "${MPIFY_JOBS:-2}" --target mpify_examples >/dev/null
cmake --install "$scratch/examples" >/dev/null
rm -rf "$scratch/examples"  # the notebooks use the installed library, not this build

run() {  # notebook, expectations...
  local notebook=$1; shift
  /usr/bin/python3 "$source/tests/kernel/run_notebook.py" "$source/examples/notebooks/$notebook.ipynb" \
    --out "$build/notebooks/installed/$notebook.ipynb" --workdir "$scratch/run-$notebook" \
    --source-root "$source" --build-dir "$scratch/no-build-tree" --jupyter-path "$prefix/share/jupyter" "$@"
}
run collab --expect "held-out RMSE: alone" --expect-image
run own_functions --expect "{ 49, 50, 51, 52 }" --expect "sum of rank + 1 over 3 ranks = 6"
echo "the notebooks ran against the install in $prefix"
