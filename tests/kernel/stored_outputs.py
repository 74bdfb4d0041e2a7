#!/usr/bin/env python3
"""Runs xeus-cling notebooks cell by cell through mpify-kernel and reports the share of
their code cells that behave as their stored outputs say.

  stored_outputs.py --jupyter-path BUILD/share/jupyter NOTEBOOK.ipynb... [--min-share 0.9]

Each notebook gets a fresh kernel, in a temporary folder. A cell behaves as stored when
what it prints on stdout, its result (Out[n], text/plain), whether it failed, and the
kinds of rich output it displayed all match its stored outputs. Pointers (0x...) and
%timeit's figures are compared by shape, not value. Cells never executed when the
notebook was saved (no execution count) are not counted. Run with /usr/bin/python3.
"""
import argparse
import json
import os
import queue
import re
import shutil
import sys
import tempfile
import time

from jupyter_client.manager import KernelManager

TIMEIT = re.compile(r"^[\d.]+ (ns|\u00b5s|us|ms|s) \u00b1 [\d.]+ (ns|\u00b5s|us|ms|s) per loop .*$", re.M)


def normalized(text):
    text = re.sub(r"0x[0-9a-fA-F]+", "0x?", text)
    text = TIMEIT.sub("<timeit>", text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def joined(value):
    return "".join(value) if isinstance(value, list) else (value or "")


def expected_of(cell):
    stdout, result, failed, displays = "", None, False, set()
    for output in cell.get("outputs", []):
        kind = output["output_type"]
        if kind == "stream" and output.get("name") == "stdout":
            stdout += joined(output.get("text"))
        elif kind == "execute_result":
            result = result_of(output.get("data", {}))
        elif kind == "display_data":
            displays |= set(output.get("data", {}))
        elif kind == "error":
            failed = True
    return {"stdout": normalized(stdout), "result": result, "failed": failed, "displays": displays}


def result_of(data):
    """A result as compared: its text, or for a rich one without text, its kinds."""
    if "text/plain" in data:
        return normalized(joined(data["text/plain"]))
    return tuple(sorted(data))


class Session:
    def __init__(self, folder):
        self.manager = KernelManager(kernel_name="mpify-cpp17")
        self.manager.start_kernel(cwd=folder)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def close(self):
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)

    def run(self, code, timeout=120):
        msg_id = self.client.execute(code, allow_stdin=False)
        stdout, result, failed, displays = "", None, False, set()
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                if time.monotonic() > deadline:
                    self.manager.interrupt_kernel()
                    deadline = time.monotonic() + 10
                    failed = True
                continue
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "status" and content["execution_state"] == "idle":
                break
            if kind == "stream" and content["name"] == "stdout":
                stdout += content["text"]
            elif kind == "execute_result":
                result = result_of(content["data"])
            elif kind == "display_data":
                displays |= set(content["data"])
            elif kind == "error":
                failed = True
        return {"stdout": normalized(stdout), "result": result, "failed": failed, "displays": displays}


def check_notebook(path, verbose):
    with open(path) as file:
        notebook = json.load(file)
    folder = tempfile.mkdtemp(prefix="mpify-stored-outputs-")
    session = Session(folder)
    compared = matched = 0
    mismatches = []
    try:
        for index, cell in enumerate(notebook.get("cells", [])):
            if cell.get("cell_type") != "code":
                continue
            code = joined(cell.get("source"))
            if not code.strip():
                continue
            got = session.run(code)
            if cell.get("execution_count") is None and not cell.get("outputs"):
                continue  # never run when the notebook was saved: nothing to compare
            expected = expected_of(cell)
            compared += 1
            differences = [key for key in ("stdout", "result", "failed", "displays") if got[key] != expected[key]]
            if not differences:
                matched += 1
            else:
                mismatches.append((index, code, differences, expected, got))
    finally:
        session.close()
        shutil.rmtree(folder, ignore_errors=True)
    print("{}: {} of {} code cells behave as stored ({:.0%})".format(
        os.path.basename(path), matched, compared, matched / compared if compared else 1.0))
    for index, code, differences, expected, got in mismatches[: None if verbose else 5]:
        print("  cell {} differs in {}:\n    code: {!r}".format(index, ", ".join(differences), code[:200]))
        for key in differences:
            print("    {}: stored {!r}, got {!r}".format(key, expected[key], got[key]))
    return compared, matched


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+")
    parser.add_argument("--jupyter-path", required=True)
    parser.add_argument("--min-share", type=float, default=0.0, help="fail below this share of all cells")
    parser.add_argument("--verbose", action="store_true", help="every mismatch, not the first five")
    args = parser.parse_args()
    os.environ["JUPYTER_PATH"] = args.jupyter_path
    compared = matched = 0
    for path in args.notebooks:
        c, m = check_notebook(path, args.verbose)
        compared, matched = compared + c, matched + m
    share = matched / compared if compared else 1.0
    print("in all: {} of {} code cells behave as stored ({:.1%})".format(matched, compared, share))
    return 0 if share >= args.min_share else 1


if __name__ == "__main__":
    sys.exit(main())
