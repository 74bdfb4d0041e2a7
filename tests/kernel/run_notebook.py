#!/usr/bin/env python3
"""Executes a notebook top to bottom through mpify-kernel, as Jupyter would.

  run_notebook.py NOTEBOOK.ipynb --out EXECUTED.ipynb --workdir DIR --source-root SRC
                  --build-dir BUILD [--jupyter-path DIR] [--expect TEXT]... [--expect-image]
                  [--timeout S]

Debian's python3-nbclient drives the kernel through the real protocol; the kernel is
started from its kernelspec (BUILD/share/jupyter/kernels/mpify-cpp17, or an installed one:
--jupyter-path PREFIX/share/jupyter). Fails on any
error output, on an expected text missing from the outputs, or (--expect-image) when no
cell displayed an image. The executed notebook, outputs included, is saved to --out.

The bundled notebooks find the examples' headers relative to their folder (..), and %%file
cells write next to them. So that a test
writes nothing into the source tree, the notebook runs from a copy in
DIR/examples/notebooks/, beside links to the source's folders and to the build folder.
Run with /usr/bin/python3 (Debian's Jupyter modules).
"""
import argparse
import os
import shutil
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def mirror(workdir, source_root, build_dir):
    """DIR/{include, examples/*, build} as links; returns DIR/examples/notebooks."""
    if workdir.exists():
        shutil.rmtree(workdir)
    notebooks = workdir / "examples" / "notebooks"
    notebooks.mkdir(parents=True)
    (workdir / "include").symlink_to(source_root / "include")
    (workdir / "build").symlink_to(build_dir)
    for entry in (source_root / "examples").iterdir():
        if entry.name != "notebooks":
            (workdir / "examples" / entry.name).symlink_to(entry)
    return notebooks


def outputs(notebook):
    for cell in notebook.cells:
        if cell.cell_type == "code":
            yield from cell.get("outputs", [])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--source-root", type=Path, required=True)
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--expect", action="append", default=[], help="text some output must contain")
    parser.add_argument("--expect-image", action="store_true")
    parser.add_argument("--jupyter-path", type=Path, help="the kernelspec's share/jupyter (default: BUILD's)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args()

    os.environ["JUPYTER_PATH"] = str((args.jupyter_path or args.build_dir / "share" / "jupyter").resolve())
    folder = mirror(args.workdir.resolve(), args.source_root.resolve(), args.build_dir.resolve())
    notebook = nbformat.read(str(args.notebook), as_version=4)
    client = NotebookClient(notebook, timeout=args.timeout, kernel_name="mpify-cpp17",
                            resources={"metadata": {"path": str(folder)}})
    problems = []
    try:
        client.execute()
    except CellExecutionError as error:
        problems.append("a cell failed:\n{}".format(error))

    args.out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(args.out))

    everything = list(outputs(notebook))
    for output in everything:
        if output.output_type == "error":
            problems.append("error output: {}: {}".format(output.ename, output.evalue))
    text = "".join(o.get("text", "") for o in everything if o.output_type == "stream")
    text += "".join(o.get("data", {}).get("text/plain", "") for o in everything if "data" in o)
    for expected in args.expect:
        if expected not in text:
            problems.append("no output contains {!r}".format(expected))
    images = [o for o in everything if any(k.startswith("image/") for k in o.get("data", {}))]
    if args.expect_image and not images:
        problems.append("no cell displayed an image")

    for cell in notebook.cells:  # the log shows what a reader of the notebook would see
        if cell.cell_type != "code":
            continue
        print("[cell {}]".format(cell.get("execution_count")))
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                sys.stdout.write(output.text)
            elif output.output_type in ("display_data", "execute_result"):
                print("<{}>".format(", ".join(sorted(output.data))))
            elif output.output_type == "error":
                print("\n".join(output.traceback))
    for problem in problems:
        print("run_notebook: " + problem)
    print("run_notebook: {} {} (executed notebook: {})".format(
        args.notebook.name, "FAILED" if problems else "passed", args.out))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
