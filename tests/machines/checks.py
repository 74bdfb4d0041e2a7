"""What the machines tests share: a check that prints its verdict and keeps count.
MPIFY_TEST_VERBOSE=1 prints every check's detail, not only the failures'."""
import os

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
