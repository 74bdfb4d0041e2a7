#!/usr/bin/env python3
"""From a notebook's launch call to every rank's first optimizer step: mpify against the peers.

Each launcher runs in a "kernel": a process of its own that has imported and used LibTorch
before it launches, as a notebook's kernel has after its first cells. The kernel then makes
the launch call RUNS times; each call starts n ranks that each build the intro CNN, wrap it in
their DDP, and take one SGD step on a batch of 64 (Gloo on loopback for the Python peers;
mpify's default group on one machine, and Gloo). A call's latency is from just before the
launch to the end of the last rank's first step, on the monotonic clock every process shares.

Launchers: mpify's `in_ddp` (build/bin/mpify_launch_bench), accelerate's `notebook_launcher`
(fork), `torch.multiprocessing.spawn` + `init_process_group`, and Python mpify's
`in_torchddp` (not on PyPI: give a checkout of github.com/philtrade/mpify with
--python-mpify; it needs `multiprocess` from PyPI). The kernels are interleaved, ROUNDS
rounds of every launcher for n = 2 and 4; the table gives the median of the first calls of
the kernels and the median of their later calls, and mpify's against the fastest peer.

    scripts/bench-peers.sh 2.11.0     # a Python with torch 2.11.0, accelerate, multiprocess
    ~/.cache/mpify/peers-2.11.0/bin/python benchmarks/launch_bench.py build-libtorch-2.11.0 \\
        [--rounds 3] [--runs 3] [--python-mpify DIR]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BATCH = 64


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cnn():
    # The intro CNN (examples/intro/cnn.hpp), layer for layer.
    import torch.nn as nn
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10))


def batch():
    import torch
    torch.manual_seed(0)
    return torch.randn(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))


def note_step_end(outdir, rank):
    with open(os.path.join(outdir, str(rank)), "w") as f:
        f.write(str(time.monotonic_ns()))


def ddp_first_step(rank, outdir):
    """A rank's first step under torch.distributed's DDP, the group already formed."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    images, labels = batch()
    model = torch.nn.parallel.DistributedDataParallel(cnn())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    optimizer.zero_grad()
    F.cross_entropy(model(images), labels).backward()
    optimizer.step()
    note_step_end(outdir, rank)


def spawned_rank(rank, world, port, outdir):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    ddp_first_step(rank, outdir)
    dist.destroy_process_group()


def accelerate_rank(outdir):
    import torch
    import torch.nn.functional as F
    from accelerate import Accelerator
    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    images, labels = batch()
    model = cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model, optimizer = accelerator.prepare(model, optimizer)
    optimizer.zero_grad()
    accelerator.backward(F.cross_entropy(model(images), labels))
    optimizer.step()
    note_step_end(outdir, accelerator.process_index)


def python_mpify_rank(outdir):
    import torch.distributed as dist
    ddp_first_step(dist.get_rank(), outdir)


def launch(launcher, n, outdir):
    """One launch call of a kernel; Python launchers only."""
    port = free_port()
    if launcher == "torch.multiprocessing.spawn":
        import torch.multiprocessing as mp
        mp.spawn(spawned_rank, args=(n, port, outdir), nprocs=n, join=True)
    elif launcher == "accelerate notebook_launcher":
        from accelerate import notebook_launcher
        notebook_launcher(accelerate_rank, args=(outdir,), num_processes=n, use_port=str(port))
    elif launcher == "Python mpify in_torchddp":
        import mpify
        mpify.in_torchddp(n, python_mpify_rank, outdir,
                          ctx=mpify.TorchDDPCtx(world_size=n, port=port, use_gpu=False))
    else:
        raise ValueError(launcher)


def kernel(launcher, n, runs):
    """The kernel process: LibTorch used, then `runs` launches; a latency a line."""
    import torch
    (torch.ones(8, 8) @ torch.ones(8, 8)).sum().item()
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as outdir:
            start = time.monotonic_ns()
            launch(launcher, n, outdir)
            ends = [int(open(os.path.join(outdir, f)).read()) for f in os.listdir(outdir)]
            if len(ends) != n:
                sys.exit(f"{launcher}: {len(ends)} of {n} ranks reported their step")
            print(f"latency {(max(ends) - start) / 1e9:.4f}", flush=True)


def run_kernel(command, env=None):
    out = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    lines = [line.split()[-1] for line in out.stdout.splitlines() if line.startswith("latency ") or
             line.replace(".", "", 1).isdigit()]
    return [float(x) for x in lines]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3, help="launch calls per kernel: the first and RUNS-1 later")
    parser.add_argument("--python-mpify", help="a checkout of github.com/philtrade/mpify")
    parser.add_argument("--kernel", nargs=3, metavar=("LAUNCHER", "N", "RUNS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.kernel:
        launcher, n, runs = args.kernel
        kernel(launcher, int(n), int(runs))
        return
    if not args.build:
        parser.error("give the build folder of mpify (e.g. build-libtorch-2.11.0)")

    import torch
    launchers = {
        "mpify in_ddp": lambda n: [os.path.join(args.build, "bin", "mpify_launch_bench"), str(n), str(args.runs)],
        "mpify in_ddp, Gloo": lambda n: [os.path.join(args.build, "bin", "mpify_launch_bench"), str(n),
                                         str(args.runs), "gloo"],
    }
    peers = ["accelerate notebook_launcher", "torch.multiprocessing.spawn"]
    env = dict(os.environ)
    try:
        import accelerate
        accelerate_version = accelerate.__version__
    except ImportError:
        peers.remove("accelerate notebook_launcher")
        accelerate_version = None
        print("accelerate is not installed: its notebook_launcher is left out (scripts/bench-peers.sh)")
    if args.python_mpify:
        peers.append("Python mpify in_torchddp")
        env["PYTHONPATH"] = os.path.abspath(args.python_mpify) + os.pathsep + env.get("PYTHONPATH", "")
    for peer in peers:
        launchers[peer] = lambda n, peer=peer: [sys.executable, os.path.abspath(__file__), "--kernel", peer, str(n),
                                                str(args.runs)]

    print(f"torch {torch.__version__}, accelerate {accelerate_version}; {args.rounds} kernels of {args.runs} "
          f"calls per launcher and n, interleaved")
    first, later = {}, {}
    for _ in range(args.rounds):
        for n in (2, 4):
            for name, command in launchers.items():
                latencies = run_kernel(command(n), env)
                if len(latencies) != args.runs:
                    sys.exit(f"{name}: {len(latencies)} latencies of {args.runs}")
                first.setdefault((name, n), []).append(latencies[0])
                later.setdefault((name, n), []).extend(latencies[1:])

    median = statistics.median
    print(f"\n| launcher | n | first call of a kernel (s) | later calls (s) |")
    print("|---|---|---|---|")
    for n in (2, 4):
        for name in launchers:
            later_text = f"{median(later[(name, n)]):.3f}" if later[(name, n)] else "-"
            print(f"| {name} | {n} | {median(first[(name, n)]):.3f} | {later_text} |")
    print()
    for n in (2, 4):
        fastest_first = min(peers, key=lambda p: median(first[(p, n)]))
        print(f"n = {n}: mpify's first call / the fastest peer's ({fastest_first}): "
              f"{median(first[('mpify in_ddp', n)]) / median(first[(fastest_first, n)]):.3f}")
        if args.runs > 1:
            fastest = min(peers, key=lambda p: median(later[(p, n)]))
            print(f"n = {n}: mpify's later calls / the fastest peer's ({fastest}): "
                  f"{median(later[('mpify in_ddp', n)]) / median(later[(fastest, n)]):.3f}")


if __name__ == "__main__":
    main()
