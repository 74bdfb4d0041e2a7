#!/usr/bin/env python3
"""Several machines against one, in one run: all-reduce bandwidth of 1, 16 and 64 MiB
in a group of 4 (2 ranks on each of two network namespaces joined by a veth pair, vs 4
ranks on one machine over loopback), and the time for in_ddp to form that group.
Needs root (ip netns).

  python3 benchmarks/machines_bench.py --build-dir build"""
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default="build")
    args = parser.parse_args()
    program = os.path.abspath(os.path.join(args.build_dir, "bin", "mpify_bench_machines"))
    with TwoHosts() as hosts:
        master = hosts.addresses["a"]
        a = hosts.start("a", program, "across", 2, 0, master, 29600, None)
        b = hosts.start("b", program, "across", 2, 1, master, 29600, None)
        across, _ = a.communicate(timeout=600)
        b.communicate(timeout=60)
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
