#!/usr/bin/env python3
"""Executes a notebook written for the xeus-cling C++17 kernel in clang-repl-19.

xeus-cling is not packaged for Debian; clang-repl is the same kind of interpreter (the
engine of xeus-cpp). This runner feeds the notebook's code cells, in order, to one
clang-repl process, translates the cling pragmas and the %%file magic, fails on any
compiler or JIT error, and saves the executed notebook with each cell's output.

  notebook_runner.py NOTEBOOK.ipynb --out EXECUTED.ipynb --workdir DIR
                     [--lib-dir DIR]... [--include-dir DIR]... [--timeout S] [--clang-repl PATH]

How the cells reach clang-repl (measured on clang-repl-19): it reads stdin line by line
and each line is a separate input, so a multi-line cell cannot be fed as it is. Each
cell goes to DIR/cell_<k>.cpp and clang-repl reads the one line `#include "…/cell_<k>.cpp"`:
functions over many lines, comments and top-level statements all work that way, and
diagnostics name cell_<k>.cpp and the cell's own line numbers.

Translations:
  #pragma cling add_include_path("p")   -> --Xcc=-I<p> when clang-repl starts (it has no
                                           command to add one later); p is relative to
                                           the notebook's folder, as in Jupyter
  #pragma cling add_library_path("p")   -> searched by load(), after every --lib-dir
  #pragma cling load("name")            -> %lib <resolved path>, before the cell
  %%file NAME (first line)              -> the runner writes the rest to DIR/NAME
The code runs with DIR as its working directory.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

PRAGMA = re.compile(r'^\s*#\s*pragma\s+cling\s+(add_include_path|add_library_path|load)\s*\(\s*"([^"]*)"\s*\)\s*$')
MARKER = "@@mpify-notebook-cell-done {}@@"
MARKER_LINE = re.compile(r"\n?@@mpify-notebook-cell-done (\d+)@@\n")
# clang's diagnostics: "file:line:col: error: ...", "error: ...", "fatal error: ...",
# and the JIT's "JIT session error: ...". Program output that merely contains the word
# "error" in a sentence is not one of these.
DIAGNOSTIC = re.compile(r"^(?:\S+:\d+:\d+: )?(?:fatal error|error|JIT session error): ", re.MULTILINE)
# What a LibTorch notebook needs from clang-repl (see ../shared/NOTES.md).
DEFAULT_FLAGS = ["--Xcc=-std=c++17", "--Xcc=-D_GLIBCXX_USE_CXX11_ABI=1",
                 "--Xcc=-I/usr/include/torch/csrc/api/include"]


def cell_text(cell):
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


class Failure(Exception):
    pass


def resolve_library(name, search, cell_number):
    candidates = [Path(name)] if os.path.isabs(name) else []
    for folder in search:
        base = name[3:] if name.startswith("lib") else name
        candidates += [folder / name, folder / (name + ".so"), folder / ("lib" + base + ".so")]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise Failure('cell {}: #pragma cling load("{}"): no such library in {}'.format(
        cell_number, name, ", ".join(str(f) for f in search) or "(no library path given)"))


def plan(notebook, notebook_dir, workdir, lib_dirs):
    """Turns the code cells into stdin lines; returns (include dirs, lines, cells)."""
    include_dirs, library_path = [], [Path(d).resolve() for d in lib_dirs]
    lines, cells = [], []  # cells: (number, cell, text the runner produced itself or None)
    for number, cell in enumerate((c for c in notebook["cells"] if c.get("cell_type") == "code"), start=1):
        text = cell_text(cell)
        first, _, rest = text.partition("\n")
        if first.startswith("%%file"):
            name = first[len("%%file"):].strip()
            target = workdir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(rest if rest.endswith("\n") else rest + "\n")
            cells.append((number, cell, "Writing {}\n".format(name)))
            continue
        code = []
        for line in text.split("\n"):
            pragma = PRAGMA.match(line)
            if not pragma:
                code.append(line)
                continue
            kind, argument = pragma.groups()
            if kind == "add_include_path":
                include_dirs.append((notebook_dir / argument).resolve())
            elif kind == "add_library_path":
                library_path.append((notebook_dir / argument).resolve())
            else:
                lines.append("%lib {}".format(resolve_library(argument, library_path, number)))
            code.append("")  # keeps the cell's line numbers in diagnostics
        cell_file = workdir / "cell_{}.cpp".format(number)
        cell_file.write_text("\n".join(code) + "\n")
        lines.append('#include "{}"'.format(cell_file))
        lines.append('std::printf("\\n{}\\n"); std::fflush(nullptr);'.format(MARKER.format(number)))
        cells.append((number, cell, None))
    return include_dirs, lines, cells


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="where the executed notebook goes")
    parser.add_argument("--workdir", type=Path, required=True, help="the code's working directory")
    parser.add_argument("--lib-dir", action="append", default=[], help="searched first by load()")
    parser.add_argument("--include-dir", action="append", default=[])
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--clang-repl", default="clang-repl-19")
    args = parser.parse_args()

    notebook = json.loads(args.notebook.read_text())
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        include_dirs, lines, cells = plan(notebook, args.notebook.resolve().parent, workdir, args.lib_dir)
    except Failure as failure:
        print("notebook_runner: {}".format(failure))
        return 1

    # stdout is a pipe here: unbuffered, or output written before a crash is lost.
    stdin = ["#include <cstdio>", "std::setvbuf(stdout, nullptr, _IONBF, 0);"] + lines
    # clang-repl can crash at %quit once LibTorch ran: leave without running exit handlers.
    stdin.append("std::fflush(nullptr); std::_Exit(0);")
    command = [args.clang_repl] + DEFAULT_FLAGS
    command += ["--Xcc=-I{}".format(Path(d).resolve()) for d in args.include_dir + include_dirs]

    process = subprocess.Popen(command, cwd=workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    timed_out = False
    try:
        output, _ = process.communicate("\n".join(stdin) + "\n", timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the interpreter and any rank it started
        output, _ = process.communicate()
        timed_out = True

    # Split the output at the markers: what precedes marker k is cell k's.
    per_cell, start = {}, 0
    for match in MARKER_LINE.finditer(output):
        per_cell[int(match.group(1))] = output[start:match.start()]
        start = match.end()
    leftover = output[start:]

    failed = False
    for number, cell, produced in cells:
        if produced is not None:
            text, ok, reason = produced, True, ""
        elif number in per_cell:
            text = per_cell[number]
            errors = DIAGNOSTIC.findall(text)
            ok, reason = not errors, "clang-repl reported an error"
        else:  # the interpreter never got past this cell
            text = leftover
            leftover = ""
            ok = False
            reason = ("timed out after {:.0f} s".format(args.timeout) if timed_out else
                      "clang-repl stopped here (exit status {})".format(process.returncode))
        cell["execution_count"] = number
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": text}] if text else []
        print("[cell {}] {}".format(number, "ok" if ok else "FAILED: " + reason))
        for line in text.splitlines():  # the JIT's symbol lists run to pages: cut for the log
            print(line if len(line) <= 400 else line[:400] + " [...]")
        if not ok:
            first = next((l for l in text.splitlines() if DIAGNOSTIC.match(l)), reason)
            cell["outputs"].append({"output_type": "error", "ename": "CellError", "evalue": first,
                                    "traceback": text.splitlines() or [reason]})
            failed = True
            break  # later cells depend on this one
    if not failed and process.returncode not in (0, None):
        print("notebook_runner: clang-repl exited with status {}".format(process.returncode))
        failed = True

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(notebook, indent=1) + "\n")
    print("notebook_runner: {} {} (executed notebook: {})".format(
        args.notebook.name, "FAILED" if failed else "passed", args.out))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
