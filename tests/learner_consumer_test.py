#!/usr/bin/env python3
"""The installed Learner in a user's program: trains, checkpoints, is killed, resumes.

  python3 tests/learner_consumer_test.py <build dir>

Installs the build into a scratch prefix, builds tests/learner_consumer against it with
find_package(mpify COMPONENTS learner), and runs its program (a fit of 4 epochs on two
processes, checkpointing after each): the first run is killed with SIGKILL once epoch 2's
checkpoint is written (the program says so and waits), and every process of that run
must be gone; the second run, with the same checkpoint folder, trains only epochs 3 and 4
and ends with the whole history. Standard library only.
"""
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEADLINE_SECONDS = 120


def check(command, **extra):
    result = subprocess.run(command, capture_output=True, text=True, **extra)
    if result.returncode != 0:
        sys.exit("failed ({}): {}\n{}{}".format(result.returncode, " ".join(map(str, command)), result.stdout,
                                                result.stderr))
    return result.stdout


def session_members(session):
    """The processes of session `session` (the first run and whatever it started)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == session and fields[0] != "Z":
            members.append(int(entry))
    return members


def read_until(process, wanted, deadline):
    """stdout of `process` up to and including the line `wanted`, within `deadline`."""
    seen = ""
    while not seen.endswith(wanted + "\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
            sys.exit("no '{}' within {} s; the program printed:\n{}".format(wanted, DEADLINE_SECONDS, seen))
        chunk = os.read(process.stdout.fileno(), 4096).decode()
        if not chunk:
            sys.exit("the program ended before '{}' (exit {}):\n{}".format(wanted, process.wait(), seen))
        seen += chunk
    return seen


def main():
    build = Path(sys.argv[1]).resolve()
    source = Path(__file__).resolve().parent / "learner_consumer"
    scratch = Path(tempfile.mkdtemp(prefix="mpify-learner-consumer-"))
    try:
        prefix = scratch / "prefix"
        check(["cmake", "--install", str(build), "--prefix", str(prefix)])
        check(["cmake", "-S", str(source), "-B", str(scratch / "build"), "-DCMAKE_PREFIX_PATH=" + str(prefix),
               "-DCMAKE_BUILD_TYPE=Release"])
        check(["cmake", "--build", str(scratch / "build"), "-j", "2"])
        program = scratch / "build" / "resumable_training"
        needed = check(["ldd", str(program)])
        learner_line = [line for line in needed.splitlines() if "libmpify_learner" in line]
        if not learner_line or str(prefix) not in learner_line[0]:
            sys.exit("the program does not load the installed libmpify_learner:\n" + needed)
        checkpoints = scratch / "checkpoints"

        first = subprocess.Popen([str(program), str(checkpoints), "--pause-after-epoch", "2"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        read_until(first, "paused after epoch 2", time.monotonic() + DEADLINE_SECONDS)
        if not (checkpoints / "checkpoint.pt").is_file():
            sys.exit("no checkpoint.pt in {} after epoch 2".format(checkpoints))
        first.kill()
        first.wait()
        deadline = time.monotonic() + 30
        while session_members(first.pid):
            if time.monotonic() > deadline:
                sys.exit("processes of the killed run still running 30 s later: {}".format(session_members(first.pid)))
            time.sleep(0.05)
        first.stdin.close()
        first.stdout.close()
        first.stderr.close()
        print("first run: killed after epoch 2's checkpoint; none of its processes left")

        second = check([str(program), str(checkpoints)], timeout=DEADLINE_SECONDS)
        print("second run:\n" + second)
        for expected in ("epochs in the history: 4", "epochs trained by this run: 2"):
            if expected not in second:
                sys.exit("the second run did not resume: no '{}'".format(expected))
        accuracy = float(second.split("accuracy: ")[1].split()[0])
        if accuracy < 0.8:
            sys.exit("the resumed fit ended at accuracy {} (a fit of these points reaches 0.8)".format(accuracy))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
