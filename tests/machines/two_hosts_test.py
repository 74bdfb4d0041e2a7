#!/usr/bin/env python3
"""Two machines on one: network namespaces joined by a veth pair, with addresses that
exist only inside them. One caller per machine, 2 local ranks each, placed by
torchrun-style variables (no GLOO_SOCKET_IFNAME): the group of 4 forms, all-reduces and
trains like one process; a machine killed in the middle, a master that is not there, and
machines started with different local rank counts each end in a clear error, on time,
with nothing left running or listening.

  two_hosts_test.py --caller build/bin/mpify_test_machine_caller

Needs root (ip netns); exits 77 (ctest: skipped) where namespaces cannot be made."""
import argparse
import sys
import time

from checks import check
from netns import finish, run_on_two_hosts


def read_until(process, text, within):
    """Lines of `process` up to one containing `text` (False if it ended first)."""
    deadline = time.monotonic() + within
    seen = ""
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            return False, seen
        seen += line
        if text in line:
            return True, seen
    return False, seen


def nothing_left(hosts, what):
    for host in "ab":
        check(not hosts.pids(host), f"{what}: no process left on {host}", str(hosts.pids(host)))
        check(not hosts.listeners(host), f"{what}: nothing listens on {host}", str(hosts.listeners(host)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--caller", required=True)
    args = parser.parse_args()
    return run_on_two_hosts(lambda hosts: run_cases(hosts, args.caller))


def run_cases(hosts, caller):
    master = hosts.addresses["a"]
    timeout_ms = 8000

    # A group of 4 over the link: the sum of ranks, torchrun's names in every rank.
    a = hosts.start("a", caller, "allreduce", 2, 0, master, 29511, timeout_ms)
    b = hosts.start("b", caller, "allreduce", 2, 1, master, 29511, timeout_ms)
    (out_a, status_a), (out_b, status_b) = finish(a, 120), finish(b, 120)
    for name, out, status in (("a", out_a, status_a), ("b", out_b, status_b)):
        check(status == 0 and "allreduce = 6" in out, f"all-reduce over two machines on {name}: 0+1+2+3", out)
        check("4 of 4 ranks consistent" in out, f"torchrun's variables in every rank of {name}", out)
    check(f"MASTER_ADDR={master} MASTER_PORT=29511" in out_a and "GROUP_RANK=0" in out_a and "LOCAL_WORLD_SIZE=2" in out_a,
          "rank 0 sees the master's address and port", out_a)
    nothing_left(hosts, "after the all-reduce")

    # 5 DDP steps with batch 12/4 each match one process with batch 12.
    a = hosts.start("a", caller, "train", 2, 0, master, 29512, timeout_ms)
    b = hosts.start("b", caller, "train", 2, 1, master, 29512, timeout_ms)
    (out_a, status_a), (out_b, status_b) = finish(a, 180), finish(b, 180)
    for name, out, status in (("a", out_a, status_a), ("b", out_b, status_b)):
        difference = None
        if status == 0 and "largest difference = " in out:
            difference = float(out.split("largest difference = ")[1].split()[0])
        check(difference is not None and difference < 1e-5,
              f"5 DDP steps across machines match one process within 1e-5 on {name}", out)

    # Machine b killed in the middle of training: a names ranks 2-3, in time.
    for victim, survivor, port in (("b", "a", 29513), ("a", "b", 29514)):
        a = hosts.start("a", caller, "until-stopped", 2, 0, master, port, timeout_ms)
        b = hosts.start("b", caller, "until-stopped", 2, 1, master, port, timeout_ms)
        started, seen = read_until(a, "training", 120)
        check(started, f"training started (before killing {victim})", seen)
        if victim == "b":
            # Across machines, the store and Gloo listen on the master's link address only.
            bad = [(addr, port) for addr, port in hosts.listeners("a") if addr != master]
            check(not bad, "on the master, nothing listens on another address (no *:port, no loopback)", str(bad))
        killed_at = time.monotonic()
        hosts.kill_everything(victim)
        out, status = finish(a if survivor == "a" else b, timeout_ms / 1000 + 5)
        elapsed = time.monotonic() - killed_at
        finish(b if survivor == "a" else a, 10)
        check(status is not None and elapsed < timeout_ms / 1000 + 5,
              f"{survivor} ends within timeout + 5 s of {victim}'s death ({elapsed:.1f} s)", out)
        if victim == "b":
            check(status == 1 and "ranks 2-3 on" in out and "went away without a word" in out,
                  "the master names the missing ranks 2-3 and says their machine went away", out)
        else:
            check(status == 1 and "hosted by the machine of rank 0, is gone" in out,
                  "machine b says the master's machine (rank 0's) is gone", out)
        nothing_left(hosts, f"after {victim} was killed")

    # Machines started with different numbers of local ranks: a message that says so.
    a = hosts.start("a", caller, "allreduce", 2, 0, master, 29515, 4000)
    b = hosts.start("b", caller, "allreduce", 3, 1, master, 29515, 4000)
    out_b, status_b = finish(b, 4 + 5)
    out_a, status_a = finish(a, 4 + 5)
    # The master fixes the group's shape before anyone else may join: b is the one refused.
    check(status_b == 1 and "2 per machine" in out_b and "3 per machine" in out_b,
          "the machine with 3 local ranks is refused, naming both shapes", out_b)
    check(status_a == 1 and "did not join" in out_a and "3 per machine" in out_a,
          "the master's ranks fail within the timeout and say why", out_a)
    nothing_left(hosts, "after the mismatch")

    # A machine that never comes: the master's ranks name the missing ones, in time.
    started_at = time.monotonic()
    a = hosts.start("a", caller, "allreduce", 2, 0, master, 29517, 3000)
    out_a, status_a = finish(a, 3 + 5)
    check(status_a == 1 and "rank(s) 2, 3 did not join the group (2, 3 from a machine the store has not heard from)"
          in out_a and time.monotonic() - started_at < 8,
          "a machine that never comes: the master names ranks 2, 3 within the timeout", out_a)
    nothing_left(hosts, "after the machine that never came")

    # A master address where nobody is: a clear error within the timeout.
    nobody = master.rsplit(".", 1)[0] + ".9"
    started_at = time.monotonic()
    b = hosts.start("b", caller, "allreduce", 2, 1, nobody, 29516, 3000)
    out_b, status_b = finish(b, 3 + 5)
    check(status_b == 1 and "cannot reach the group's rendezvous" in out_b and time.monotonic() - started_at < 8,
          "an unreachable master address is a clear error within the timeout", out_b)
    nothing_left(hosts, "after the unreachable master")


if __name__ == "__main__":
    sys.exit(main())
