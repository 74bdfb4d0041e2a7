#!/usr/bin/env python3
"""Page faults of a fresh rank: what in_ddp's worker touches beyond a ranch worker's (not a
test: nothing is asserted).

  python3 benchmarks/worker_faults.py --build-dir build [--rounds 11]

Runs `mpify_bench --group ROUNDS` under `perf record -e page-faults -c 1` (every fault of
every process, children included) and counts, for rank 1 of each n = 2 call, the faults it
took once it had read its call (the worker names itself "<program> r1" then), for each of the
calls --group makes in turn: in_ddp(2, allreduce), in_ddp(2, tensors_alone) (the group
without its collective), ranch(2, meeting_floor), ranch(2, tensors_alone) and ranch(2, noop).
It prints the medians and, for in_ddp's workers, where the faults were: code or data, and in
which file (anonymous memory is "anon"), beside the tensor's and the meeting floor's. Needs perf (Debian's linux-perf) and root or kernel.perf_event_paranoid <= 2.
"""
import argparse
import collections
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# In the order mpify_bench --group makes them in each round.
KINDS = ("in_ddp", "group", "meeting_floor", "tensors_alone", "noop")


def record(bench, rounds, data):
    subprocess.run(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d", "-o", data, bench, "--group",
                    str(rounds)], check=True, stdout=subprocess.DEVNULL)


def faults_of_rank_1(data):
    """Every rank-1 process's faults, in the order the processes first faulted: for each,
    a list of (faulting address's file, code or data)."""
    script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,ip,dso,addr"], check=True,
                            capture_output=True, text=True).stdout
    by_pid = {}
    # "<program> r1  PID  ADDRESS (its file)  IP (its file)"
    line_form = re.compile(r"\s*(.*?) r1\s+(\d+)\s+([0-9a-f]+)\s+\((.*?)\)\s+([0-9a-f]+)\s+\(.*\)\s*$")
    for line in script.splitlines():
        m = line_form.match(line)
        if not m:
            continue
        pid, address, where, ip = m.group(2), m.group(3), m.group(4), m.group(5)
        name = Path(where.split(" ")[0]).name if where.startswith("/") else where
        by_pid.setdefault(pid, []).append((name or "anon", "code" if address == ip else "data"))
    return list(by_pid.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    bench = str(Path(args.build_dir) / "bin" / "mpify_bench")
    with tempfile.TemporaryDirectory() as folder:
        data = str(Path(folder) / "faults.data")
        record(bench, args.rounds, data)
        workers = faults_of_rank_1(data)
    # mpify_bench --group: ranch(2, noop) to start the template, then for n = 2 a warm-up
    # of each and `rounds` rounds of all of them in turn; n = 4 follows.
    each_round = len(KINDS)
    calls = workers[1:1 + each_round * (args.rounds + 1)]
    if len(calls) < each_round * (args.rounds + 1):
        sys.exit(f"worker_faults.py: found {len(workers)} rank-1 processes, expected at least "
                 f"{1 + each_round * (args.rounds + 1)}: is {bench} the --group of mpify_bench?")
    by_kind = {kind: calls[i::each_round][1:] for i, kind in enumerate(KINDS)}  # without the warm-up
    print(f"page faults of rank 1 after reading its call, n = 2, medians of {args.rounds}")
    for kind in KINDS:
        print(f"  {kind:14s} {statistics.median(len(w) for w in by_kind[kind]):6.0f}")
    print("in_ddp's rank 1, by where (mean per worker; tensors_alone's and meeting_floor's beside it):")
    def tally(kind):
        counts = collections.Counter(place for w in by_kind[kind] for place in w)
        return {place: n / len(by_kind[kind]) for place, n in counts.items()}
    group, tensors, floor = tally("in_ddp"), tally("tensors_alone"), tally("meeting_floor")
    for (name, kind), n in sorted(group.items(), key=lambda item: -item[1])[:12]:
        print(f"  {kind} {name:40s} {n:6.1f} {tensors.get((name, kind), 0):6.1f} {floor.get((name, kind), 0):6.1f}")


if __name__ == "__main__":
    main()
