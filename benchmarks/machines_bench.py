#!/usr/bin/env python3
"""Several machines against one, in one run: all-reduce bandwidth of 1, 16 and 64 MiB
in a group of 4 (2 ranks on each of two network namespaces joined by a veth pair, vs 4
ranks on one machine over loopback), and the time for in_ddp to form that group. With
--hooks: the seconds of a DDP training step across the two, float32 against the fp16
compression hook; --rate limits the veth pair to a network's speed (tc's tbf, e.g. 1gbit).
Needs root (ip netns, tc).

  python3 benchmarks/machines_bench.py --build-dir build
  python3 benchmarks/machines_bench.py --build-dir build --hooks --rate 1gbit"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "machines"))
from netns import TwoHosts  # noqa: E402


def figures(text):
    found = {f"allreduce {m} MiB": float(v) for m, v in re.findall(r"allreduce (\d+) MiB: ([\d.]+) GB/s", text)}
    formed = re.search(r"group formed: ([\d.]+) s", text)
    if formed:
        found["group formed"] = float(formed.group(1))
    return found


def limit(hosts, rate):
    """Each end of the veth pair sends at most `rate` (none: veth's own speed)."""
    if not rate:
        return
    for host in "ab":
        subprocess.run(["ip", "netns", "exec", hosts.names[host], "tc", "qdisc", "add", "dev", hosts.links[host],
                        "root", "tbf", "rate", rate, "burst", "256kb", "latency", "100ms"], check=True)


def on_two_machines(program, mode, rate):
    """What the first machine's caller printed, running `program mode 2` on each machine."""
    with TwoHosts() as hosts:
        limit(hosts, rate)
        master = hosts.addresses["a"]
        a = hosts.start("a", program, mode, 2, 0, master, 29600, None)
        b = hosts.start("b", program, mode, 2, 1, master, 29600, None)
        said, _ = a.communicate(timeout=600)
        b.communicate(timeout=60)
    return said


def hook_steps(program, rate):
    said = on_two_machines(program, "hooks", rate)
    steps = {name: float(v) for name, v in re.findall(r"step (float32|fp16 hook): ([\d.]+) s", said)}
    if len(steps) != 2:
        print("a run failed:\n" + said)
        return 1
    print(f"group of 4 on two machines ({rate or 'veth'}), 17 MB of gradients a step:")
    for name, seconds in steps.items():
        print(f"  {name:10} {seconds:.4f} s a step  {steps['float32'] / seconds:.2f} of float32's speed")
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--hooks", action="store_true", help="training steps with and without the fp16 hook")
    parser.add_argument("--rate", help="the veth pair's rate each way, as tc writes it (1gbit, 100mbit)")
    args = parser.parse_args()
    program = os.path.abspath(os.path.join(args.build_dir, "bin", "mpify_bench_machines"))
    if args.hooks:
        return hook_steps(program, args.rate)
    across = on_two_machines(program, "across", args.rate)
    one = subprocess.run([program, "one", "4"], capture_output=True, text=True, timeout=600).stdout
    two, local = figures(across), figures(one)
    if not two or not local:
        print("a run failed:\n" + across + one)
        return 1
    print(f"{'group of 4':22} {'two machines (veth)':>20} {'one machine':>14} {'ratio':>7}")
    for name in two:
        unit = "s" if name == "group formed" else "GB/s"
        print(f"{name:22} {two[name]:>15.3f} {unit:4} {local[name]:>9.3f} {unit:4} {two[name] / local[name]:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
