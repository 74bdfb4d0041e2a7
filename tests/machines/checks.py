"""What the machines tests share: a check that prints its verdict and keeps count, and a
way to time a caller from a line it prints. MPIFY_TEST_VERBOSE=1 prints every check's
detail, not only the failures'."""
import os
import threading
import time

failures = []


def check(condition, what, detail=""):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)
    if detail and (not condition or os.environ.get("MPIFY_TEST_VERBOSE")):
        print("     " + str(detail).replace("\n", "\n     "), flush=True)


def verdict():
    """Prints the count of failures; the exit status to return."""
    print(f"{len(failures)} failure(s)" if failures else "all passed")
    return 1 if failures else 0


def seconds_after(process, marker, within):
    """Reads `process`'s output (text, stderr merged) to its end, at most `within` s (then
    kills it): (output, exit status, seconds from the line holding `marker` to the end,
    or None if no such line came). A caller's errors are timed from the moment it says it
    started the remote ranks, not from its program's own start-up."""
    patience = threading.Timer(within, process.kill)
    patience.start()
    out, seen_at = "", None
    for line in process.stdout:
        out += line
        if seen_at is None and marker in line:
            seen_at = time.monotonic()
    process.wait()
    ended_at = time.monotonic()
    patience.cancel()
    return out, process.returncode, (ended_at - seen_at) if seen_at is not None else None
