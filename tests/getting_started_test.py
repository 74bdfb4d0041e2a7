#!/usr/bin/env python3
"""Follows docs/getting-started.md as a new user would, against an install of this build.

  python3 tests/getting_started_test.py <build dir> <repository root>

Installs the build into a scratch prefix (the page's step 2), then walks the page's marked
blocks in order:
  <!-- file: NAME -->     the next fenced block is the file NAME of the user's project
  <!-- append: NAME -->   the next fenced block is added to the end of NAME
  <!-- output: PROGRAM -->  configure and build the project (CMAKE_PREFIX_PATH = the prefix),
                          run PROGRAM in the project's folder, and expect the next fenced
                          block's lines in its output (stdout and stderr), in that order; a
                          line `...` stands for any lines the page leaves out
Exits 1 naming the first step whose output differs from the page, 0 when every step gives
what the page shows. Standard library only.
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = re.compile(r"^<!-- (file|append|output): (\S+) -->$")
FENCE = re.compile(r"^```")


def marked_blocks(page):
    """(kind, name, text) of every marked block of the page, in order."""
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks = []
    index = 0
    while index < len(lines):
        marker = MARKER.match(lines[index])
        index += 1
        if not marker:
            continue
        while not FENCE.match(lines[index]):
            index += 1
        start = index + 1
        index = start
        while not FENCE.match(lines[index]):
            index += 1
        blocks.append((marker.group(1), marker.group(2), "\n".join(lines[start:index]) + "\n"))
        index += 1
    return blocks


def run(command, **extra):
    return subprocess.run(command, capture_output=True, text=True, **extra)


def in_order(expected, output):
    """The first expected line missing from `output` (after the previous one), or None."""
    position = 0
    lines = output.split("\n")
    for line in expected.strip().split("\n"):
        if line == "...":
            continue
        while position < len(lines) and lines[position] != line:
            position += 1
        if position == len(lines):
            return line
        position += 1
    return None


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    build, root = Path(argv[1]).resolve(), Path(argv[2]).resolve()
    blocks = marked_blocks(root / "docs" / "getting-started.md")
    if not any(kind == "output" for kind, _, _ in blocks):
        print("docs/getting-started.md shows no output to check")
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        prefix, project = Path(scratch) / "prefix", Path(scratch) / "hello"
        installed = run(["cmake", "--install", str(build), "--prefix", str(prefix)])
        if installed.returncode != 0:
            print(f"the install failed:\n{installed.stdout}{installed.stderr}")
            return 1
        project.mkdir()
        for kind, name, text in blocks:
            if kind == "file":
                (project / name).write_text(text, encoding="utf-8")
            elif kind == "append":
                with open(project / name, "a", encoding="utf-8") as file:
                    file.write("\n" + text)
            else:
                steps = [["cmake", "-S", str(project), "-B", str(project / "build"), f"-DCMAKE_PREFIX_PATH={prefix}"],
                         ["cmake", "--build", str(project / "build"), "-j", os.environ.get("MPIFY_JOBS", "2")]]
                for step in steps:
                    done = run(step)
                    if done.returncode != 0:
                        print(f"{' '.join(step)} failed:\n{done.stdout[-4000:]}{done.stderr[-4000:]}")
                        return 1
                # One pipe for both streams: the lines in the order the program wrote them.
                program = subprocess.run([str(project / "build" / name)], cwd=project, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
                said = program.stdout
                missing = in_order(text, said) if program.returncode == 0 else None
                if program.returncode != 0 or missing is not None:
                    print(f"{name} (exit {program.returncode}) did not print what the page shows"
                          + (f": no line '{missing}' where expected" if missing else "") + f"; it printed:\n{said}")
                    return 1
                print(f"ok   {name}: as the page shows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
