#!/usr/bin/env python3
"""One caller against one caller per machine, on the launchers test's two-node Slurm whose
nodes are network namespaces (tests/machines/launchers_test.py), in one run, interleaved:
the wall time of a program that forms one DDP group over both nodes and all-reduces once,
  - one caller on the login node, its ranks steps of the allocation (Placement::slurm,
    2 per node; the caller is rank 0 as well): mpify_test_remote_caller allreduce;
  - one caller per node started by srun (2 ranks each, placed from Slurm's variables):
    mpify_test_machine_caller allreduce.
With --calls: instead, a caller (Placement::slurm, 2 per node) making six calls of a
function that does nothing, from a library without LibTorch and from one with it, fresh
programs alternated: the first call's wall time (it starts the node templates) and the
median of the five after it, ready and over; and the same with LibTorch after
mpify::warm_nodes, which is timed too.
Needs root, slurm-wlm and munge (scripts/install-deps.sh).

  python3 benchmarks/remote_ranks_bench.py --build-dir build [--rounds 5] [--calls] [--no-templates]"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "machines"))
import launchers_test  # noqa: E402


def timed(command, env):
    began = time.monotonic()
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - began
    if run.returncode != 0 or "allreduce = " not in run.stdout:
        sys.exit(f"{' '.join(command)} failed:\n{run.stdout}{run.stderr}")
    return took


def call_times(command, env):
    """[first call, median of the later ones] and, after "warmed:", warm_nodes's time first."""
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    lines = run.stdout.splitlines()
    times = [float(line.split()[2]) for line in lines if line.startswith("call ")]
    warm = [float(line.split()[1]) for line in lines if line.startswith("warm_nodes: ")]
    if run.returncode != 0 or len(times) != 6:
        sys.exit(f"{' '.join(command)} failed:\n{run.stdout}{run.stderr}")
    return warm + [times[0], statistics.median(times[1:])]


def compare_calls(bin_dir, rounds):
    """Plain against LibTorch library: the first call of each fresh program, and its later ones."""
    with launchers_test.SlurmCluster(namespaced=True) as cluster:
        job, env = launchers_test.allocation_of_two_nodes(cluster, "")
        if job is None:
            sys.exit("no allocation")
        try:
            modes = {"plain": "calls:plain", "torch": "calls:torch", "torch, warmed": "warmed:torch"}
            times = {kind: [] for kind in modes}
            for _ in range(rounds):
                for kind, mode in modes.items():
                    command = [f"{bin_dir}/mpify_test_remote_caller", mode, f"slurm:{job}", "2", "60000", "n1", "n2"]
                    times[kind].append(call_times(command, env))
        finally:
            subprocess.run(["scancel", job], env=cluster.env, capture_output=True)
    print("| library | call | median (s) | each round (s; later calls: their median) |")
    print("|---|---|---|---|")
    medians = {}
    for kind, rows in times.items():
        names = (["warm_nodes"] if kind.endswith("warmed") else []) + ["first", "later"]
        for column, name in enumerate(names):
            values = [row[column] for row in rows]
            medians[kind, name] = statistics.median(values)
            print(f"| {kind} | {name} | {medians[kind, name]:.3f} | {', '.join(f'{v:.3f}' for v in values)} |")
    for call in ("first", "later"):
        print(f"{call} calls: LibTorch / plain {medians['torch', call] / medians['plain', call]:.2f}")
    print(f"after warm_nodes, the first call / a later one: "
          f"{medians['torch, warmed', 'first'] / medians['torch, warmed', 'later']:.2f}")
    print_floor(bin_dir, medians["plain", "later"])


def process_floor(bin_dir, library):
    """Fork, _exit and reap of a process that has loaded `library`, as node templates run."""
    env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.hugetlb=1")
    run = subprocess.run([f"{bin_dir}/mpify_bench_process_floor", library], env=env, capture_output=True, text=True,
                         timeout=120)
    if run.returncode != 0:
        sys.exit(f"mpify_bench_process_floor {library} failed:\n{run.stdout}{run.stderr}")
    return float(run.stdout.split()[1]) / 1000, run.stdout.strip()


def print_floor(bin_dir, plain_later):
    """What the LibTorch library's workers must cost at least over the plain one's: each of the
    call's four workers is forked from its node's template and exits, and both nodes share this
    machine's cores, so the difference in their fork-and-exit, spread over the cores, adds to
    the plain call's time whatever mpify does."""
    plain, plain_line = process_floor(bin_dir, f"{bin_dir}/libmpify_test_functions.so")
    torch, torch_line = process_floor(bin_dir, f"{bin_dir}/libmpify_test_torch_functions.so")
    workers, cores = 4, os.cpu_count() or 1
    floor = (plain_later + workers * (torch - plain) / min(workers, cores)) / plain_later
    print(f"a worker's least cost, plain library: {plain_line}")
    print(f"a worker's least cost, LibTorch library: {torch_line}")
    print(f"later calls: LibTorch / plain can be no less than {floor:.2f} on {cores} cores "
          f"({workers} workers' fork and exit over the plain library's)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", action="store_true")
    parser.add_argument("--no-templates", action="store_true",
                        help="one caller with a launcher per rank and call (Placement::template_idle = 0)")
    args = parser.parse_args()
    if args.no_templates:
        os.environ["MPIFY_TEST_TEMPLATE_IDLE"] = "0"
    bin_dir = os.path.abspath(os.path.join(args.build_dir, "bin"))
    if args.calls:
        compare_calls(bin_dir, args.rounds)
        return
    with launchers_test.SlurmCluster(namespaced=True) as cluster:
        job, env = launchers_test.allocation_of_two_nodes(cluster, "")
        if job is None:
            sys.exit("no allocation")
        try:
            one_caller = [f"{bin_dir}/mpify_test_remote_caller", "allreduce", f"slurm:{job}", "2", "60000", "n1", "n2"]
            per_machine = ["srun", f"--jobid={job}", "--overlap", "-N2", "-n2", "--ntasks-per-node=1", "--quiet",
                           f"{bin_dir}/mpify_test_machine_caller", "allreduce", "2", "60000"]
            per_machine_env = dict(cluster.env, MASTER_ADDR=cluster.node_addresses["n1"])
            times = {"one": [], "per": []}
            for _ in range(args.rounds):
                times["one"].append(timed(one_caller, env))
                times["per"].append(timed(per_machine, per_machine_env))
        finally:
            subprocess.run(["scancel", job], env=cluster.env, capture_output=True)
    one, per = statistics.median(times["one"]), statistics.median(times["per"])
    print("| path | ranks | median wall time (s) | each round (s) |")
    print("|---|---|---|---|")
    print(f"| one caller, ranks as steps (Placement::slurm) | 1 + 2 × 2 | {one:.2f} | "
          f"{', '.join(f'{t:.2f}' for t in times['one'])} |")
    print(f"| a caller per node (srun -N2 -n2) | 2 × 2 | {per:.2f} | {', '.join(f'{t:.2f}' for t in times['per'])} |")
    print(f"one caller / per machine: {one / per:.2f}")


if __name__ == "__main__":
    main()
