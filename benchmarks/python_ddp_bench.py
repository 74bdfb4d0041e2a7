#!/usr/bin/env python3
"""mpify's C++ DDP against PyTorch's Python DDP on the same LibTorch, interleaved.

The intro CNN on Fashion-MNIST, batch 64 per rank, SGD with momentum, one thread per rank
(Python: Gloo on loopback; mpify: its default on one machine, the shared-memory group, and
Gloo as Python's): the same training as mpify_ddp_bench's (the C++ side is that program's
--train mode), for 1, 2 and 4 ranks, alternating C++ and Python runs so that neither
always goes first; best of RUNS each. Prints samples/s and the C++/Python ratios.

    /usr/bin/python3 benchmarks/python_ddp_bench.py build [STEPS] [RUNS]
    ~/.cache/mpify/torch-2.11.0/bin/python benchmarks/python_ddp_bench.py build-libtorch-2.11.0

Needs a Python whose torch is the LibTorch the build links: Debian's python3-torch for
build/, the wheel's virtual environment (scripts/libtorch-wheel.sh) for a wheel's build.
Without torch, says so and exits 0 (skipped).
"""
import gzip
import os
import subprocess
import sys
import time

STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 40
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
WORLDS = (1, 2, 4)
WARMUP = 5
BATCH = 64
DATA = "/usr/share/datasets/fashion-mnist/"


def python_rank(rank, world, port, out):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    count = BATCH * (STEPS + WARMUP) * world
    # The idx files' bytes after their headers (16 and 8 bytes), read without numpy, which
    # a wheel's environment may lack.
    with gzip.open(DATA + "train-images-idx3-ubyte.gz") as f:
        images = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8, offset=16).reshape(-1, 1, 28, 28)[:count]
    with gzip.open(DATA + "train-labels-idx1-ubyte.gz") as f:
        labels = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8, offset=8)[:count]
    x_all = images.float() / 255.0
    y_all = labels.long()
    # This rank's shard, shuffled as a DistributedSampler with seed 1 would.
    generator = torch.Generator().manual_seed(1)
    order = torch.randperm(count, generator=generator)[rank::world]

    class Cnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
            self.fc1, self.fc2 = nn.Linear(64 * 5 * 5, 128), nn.Linear(128, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            return self.fc2(F.relu(self.fc1(x.flatten(1))))

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Cnn())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = time.perf_counter()
    for step in range(WARMUP + STEPS):
        if step == WARMUP:
            dist.barrier()
            start = time.perf_counter()
        rows = order[step * BATCH:(step + 1) * BATCH]
        optimizer.zero_grad()
        F.cross_entropy(model(x_all[rows]), y_all[rows]).backward()
        optimizer.step()
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        out.put(BATCH * STEPS * world / seconds)
    dist.destroy_process_group()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python_run(world, tunable=False):
    import torch.multiprocessing as mp
    # Spawned ranks are fresh interpreters: they read GLIBC_TUNABLES as they start.
    if tunable:
        os.environ["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    else:
        os.environ.pop("GLIBC_TUNABLES", None)
    context = mp.get_context("spawn")
    out = context.SimpleQueue()
    port = free_port()
    processes = [context.Process(target=python_rank, args=(r, world, port, out)) for r in range(world)]
    for p in processes:
        p.start()
    for p in processes:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"a Python rank failed (exit {p.exitcode})")
    return out.get()


def cpp_run(build, world, *backend):
    program = os.path.join(build, "bin", "mpify_ddp_bench")
    return float(subprocess.run([program, "--train", str(world), str(STEPS), *backend], check=True,
                                capture_output=True, text=True).stdout.split()[-1])


def main():
    try:
        import torch
    except ImportError:
        print("SKIPPED: PyTorch for Python is not installed (Debian: apt-get install python3-torch)")
        return 0
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    best = {}
    for _ in range(RUNS):
        for world in WORLDS:
            for side, run in (("C++", lambda: cpp_run(build, world)), ("C++ Gloo", lambda: cpp_run(build, world, "gloo")),
                              ("Python", lambda: python_run(world)),
                              ("Python+", lambda: python_run(world, tunable=True))):
                best[side, world] = max(best.get((side, world), 0.0), run())
    print(f"PyTorch {torch.__version__} ({sys.executable}) against {build};")
    print(f"intro CNN, batch {BATCH} per rank, {STEPS} timed steps, one thread per rank, best of {RUNS};")
    print("samples/s. mpify C++: its default group on one machine (shared memory); C++ Gloo: mpify through")
    print("Gloo, as Python's group. Python+: the same Python ranks started with")
    print("GLIBC_TUNABLES=glibc.malloc.hugetlb=1, the malloc setting mpify gives its workers")
    print(f"| ranks | mpify C++ | C++ Gloo | Python | Python+ | C++ / Python | C++ Gloo / Python | C++ / Python+ |")
    print("|---|---|---|---|---|---|---|---|")
    for world in WORLDS:
        cpp, gloo, py, tuned = (best[side, world] for side in ("C++", "C++ Gloo", "Python", "Python+"))
        print(f"| {world} | {cpp:.0f} | {gloo:.0f} | {py:.0f} | {tuned:.0f} | {cpp / py:.2f} | {gloo / py:.2f} | "
              f"{cpp / tuned:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
