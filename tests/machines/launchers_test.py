#!/usr/bin/env python3
"""The launchers, for real: two-node Slurm clusters on this machine (Debian's slurm-wlm
and munge) and Open MPI's mpirun. On the first, each node is a machine of its own (its
slurmd in a network namespace reached over veth, n2 also in a private mount namespace),
and one caller outside an allocation has srun start its ranks as steps of it
(Placement::slurm): results, in_ddp, a library shipped to n2, the caller's port
unreachable from n2, a worker killed, an interrupt, a machine lost and the call
restarted without it (Options::min_ranks), a node dying; the intro notebook run
by mpify's kernel inside an allocation trains with a rank on a node; and
Placement::mpirun reaches the same two nodes. On the second (two
slurmd on ports 17001-17002 of 127.0.0.1), srun, sbatch and mpirun start one caller per
node, which places itself with mpify::DdpOptions::from_environment and runs in_ddp(2,
...): one group of 4. Slurm's host
lists are expanded as `scontrol show hostnames` does; mpirun without MASTER_ADDR is a
clear error. Every daemon started here is stopped here.

  launchers_test.py --caller mpify_test_machine_caller --hostlist mpify_test_hostlist \
                    --remote-caller mpify_test_remote_caller

Needs root; exits 77 (ctest: skipped) where slurm-wlm, munge or openmpi-bin are missing."""
import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from checks import check, seconds_after, verdict
from netns import ip

SKIPPED = 77
HOSTLISTS = ["n[1-2]", "gpu[01-04,7],cpu-a[1-2]", "rack[1-2]-n[08-10]", "login,node[9-11]", "a[098-101]",
             "x[1-3]y[5,7]", "n[01-2]", "n[9-011]", "single", "a,b", "c[1,3,5-6]", "pre[0-1]mid[00-01]"]


def clean_environment(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GLOO_", "MASTER_", "SLURM_", "OMPI_", "NODE_RANK",
                                                                    "GROUP_RANK", "NNODES"))}
    env.update(extra)
    return env


class SlurmCluster:
    """munged, slurmctld and two slurmd (n1, n2), all in one private folder, run in the
    foreground as this script's children: stopped (and waited for) on exit.

    `namespaced`: each node is a machine of its own as a login node sees it — its slurmd
    (and so its steps) in a network namespace of its own, reached over a veth pair from
    this (root) namespace at 10.S.I.2, with its own host name; n2 also in a private mount
    namespace where `caller_cache`/load_source (a folder of the cluster's) is an empty
    tmpfs: the caller's compiled libraries are not on n2. The caller listens at
    `caller_address` (10.S.0.1, an address of the root namespace), which the nodes reach
    through their veth and which n2 can be cut from alone (`cut_from_caller`)."""

    def __init__(self, namespaced=False):
        self.folder = tempfile.mkdtemp(prefix="mpify-slurm-")
        os.chmod(self.folder, 0o755)  # munged wants its socket's folder searchable by all
        shutil.chown(self.folder, "munge", "munge")
        self.conf = os.path.join(self.folder, "slurm.conf")
        self.env = clean_environment(SLURM_CONF=self.conf)
        self.daemons = []
        self.slurmd = {}  # node: its slurmd (also in daemons)
        self.namespaced = namespaced
        tag = os.getpid() % 100000
        subnet = 150 + os.getpid() % 50
        self.netns = {node: f"mpify-{node}-{tag}" for node in ("n1", "n2")}
        self.veths = {node: f"mps{node}{tag}" for node in ("n1", "n2")}
        self.node_addresses = {node: f"10.{subnet}.{i}.2" for i, node in enumerate(("n1", "n2"), 1)}
        self.gateways = {node: f"10.{subnet}.{i}.1" for i, node in enumerate(("n1", "n2"), 1)}
        self.caller_address = f"10.{subnet}.0.1" if namespaced else "127.0.0.1"
        self.caller_cache = os.path.join(self.folder, "caller-cache")

    def stop_leftover_sruns(self):
        """An srun of this cluster still running (a node template's step whose caller has just
        ended) would wait for the stopped controller forever: it goes first."""
        wanted = f"SLURM_CONF={self.conf}".encode()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/comm") as comm:
                    if comm.read().strip() != "srun":
                        continue
                with open(f"/proc/{pid}/environ", "rb") as environ:
                    if wanted in environ.read().split(b"\0"):
                        os.kill(int(pid), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self):
        f = self.folder
        munged = ["setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "/usr/sbin/munged", "--foreground",
                  f"--socket={f}/munge.sock", f"--pid-file={f}/munged.pid", f"--log-file={f}/munged.log",
                  f"--seed-file={f}/munged.seed"]
        self.daemons.append(subprocess.Popen(munged))
        host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
        os.makedirs(f"{f}/state")
        with open(self.conf, "w") as conf:
            conf.write(f"""ClusterName=mpifytest
SlurmctldHost={host}{f"({self.gateways['n1']})" if self.namespaced else ""}
SlurmctldPort=16817
AuthType=auth/munge
AuthInfo=socket={f}/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmUser=root
SlurmdUser=root
SelectType=select/cons_tres
MpiDefault=none
ReturnToService=2
StateSaveLocation={f}/state
SlurmdSpoolDir={f}/spool-%n
SlurmctldPidFile={f}/slurmctld.pid
SlurmdPidFile={f}/slurmd-%n.pid
SlurmctldLogFile={f}/slurmctld.log
SlurmdLogFile={f}/slurmd-%n.log
{self._nodes_conf(host)}
PartitionName=debug Nodes=n[1-2] Default=YES OverSubscribe=FORCE:4 MaxTime=INFINITE State=UP
""")
        if self.namespaced:
            self._make_network()
        self.daemons.append(subprocess.Popen(["slurmctld", "-D"], env=self.env))
        for node in ("n1", "n2"):
            self.slurmd[node] = subprocess.Popen(self._slurmd_command(node), env=self.env)
            self.daemons.append(self.slurmd[node])
        # Ready when both nodes have registered with the controller (nothing announces it:
        # ask, until they are, for a minute at most).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, capture_output=True, text=True)
            if states.returncode == 0 and states.stdout.split() == ["idle", "idle"]:
                return
            if any(daemon.poll() is not None for daemon in self.daemons):
                break
            time.sleep(0.2)
        raise RuntimeError(f"the Slurm cluster did not come up (logs in {self.folder})")

    def _nodes_conf(self, host):
        if not self.namespaced:
            return f"NodeName=n[1-2] NodeHostname={host} NodeAddr=127.0.0.1 Port=17001-17002 CPUs=2"
        return "\n".join(f"NodeName={node} NodeAddr={self.node_addresses[node]} CPUs=2" for node in ("n1", "n2"))

    def _make_network(self):
        for node in ("n1", "n2"):
            ns, veth = self.netns[node], self.veths[node]
            ip("netns", "add", ns)
            ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("addr", "add", self.gateways[node] + "/24", "dev", veth)
            ip("link", "set", veth, "up")
            ip("-n", ns, "addr", "add", self.node_addresses[node] + "/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "route", "add", self.caller_address.rsplit(".", 2)[0] + ".0.0/16", "via", self.gateways[node])
            # Node to node (Gloo between n1 and n2) passes through this namespace.
            with open(f"/proc/sys/net/ipv4/conf/{veth}/forwarding", "w") as forwarding:
                forwarding.write("1")
        # The caller's own address, on n1's link here (any local address answers on every
        # link): no node's Slurm traffic goes to it.
        ip("addr", "add", self.caller_address + "/32", "dev", self.veths["n1"])
        os.makedirs(os.path.join(self.caller_cache, "load_source"), mode=0o700)

    def _slurmd_command(self, node):
        if not self.namespaced:
            return ["slurmd", "-D", "-N", node]
        # Not `ip netns exec`: it remounts /sys, and slurmd wants the host's cgroup folder.
        hide = (f'mount -t tmpfs -o mode=0700 mpify-test "{self.caller_cache}/load_source" && '
                if node == "n2" else "")
        mount = ["--mount", "--propagation", "private"] if node == "n2" else []
        return ["nsenter", f"--net=/run/netns/{self.netns[node]}", "unshare", "--uts", *mount, "sh", "-c",
                f"hostname {node} && {hide}exec slurmd -D -N {node}"]

    def rsh_agent(self):
        """A script for Open MPI's plm_rsh_agent that runs a command on a node (by its
        address) inside that node's namespaces, as ssh would on a machine of its own."""
        script = os.path.join(self.folder, "rsh-into-node")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nhost=$1; shift\ncase $host in\n")
            for node in ("n1", "n2"):
                f.write(f"  {self.node_addresses[node]}) pid={self.slurmd[node].pid} ;;\n")
            f.write('  *) echo "no node $host" >&2; exit 255 ;;\nesac\n'
                    'exec nsenter -t "$pid" -n -u -m -- /bin/sh -c "$*"\n')
        os.chmod(script, 0o755)
        return script

    def node_processes(self, node):
        """The processes in `node`'s network namespace other than its slurmd."""
        pids = ip("netns", "pids", self.netns[node], check_status=False).stdout.split()
        return [int(p) for p in pids if int(p) != self.slurmd[node].pid]

    def cut_from_caller(self, node, cut=True):
        """Makes the caller's address unreachable from `node` (a route to a neighbour that
        never answers), or reachable again; Slurm's own traffic is not touched."""
        ip("-n", self.netns[node], "route", "add" if cut else "del", self.caller_address + "/32",
           *(["via", self.gateways[node].rsplit(".", 1)[0] + ".9"] if cut else []))

    def __exit__(self, *exc):
        self.stop_leftover_sruns()
        for daemon in reversed(self.daemons):
            daemon.terminate()
        for daemon in self.daemons:
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        if self.namespaced:
            for node in ("n1", "n2"):
                # An orphaned slurmstepd would keep the namespace alive.
                for pid in ip("netns", "pids", self.netns[node], check_status=False).stdout.split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                ip("netns", "delete", self.netns[node], check_status=False)
                ip("link", "delete", self.veths[node], check_status=False)
        shutil.rmtree(self.folder, ignore_errors=True)

    def srun(self, *args, **extra):
        env = dict(self.env, **extra)
        # The job waits in the queue while the nodes register: srun blocks until it runs.
        return subprocess.run(["srun", "--immediate=60", "-N2", "-n2", *args], env=env, capture_output=True,
                              text=True, timeout=300)


def slurm_cases(caller, hostlist, remote_caller, example, notebook):
    # One caller on a login node, its ranks steps on nodes that are machines of their own.
    with SlurmCluster(namespaced=True) as cluster:
        slurm_placement_cases(cluster, remote_caller)
        if notebook:
            notebook_on_allocation_case(cluster, notebook)
        mpirun_on_nodes_case(cluster, remote_caller)
        lost_machine_case(cluster, remote_caller)
        node_death_case(cluster, remote_caller)  # last: it leaves n2 dead
    left = [name for name in cluster.netns.values() if name in ip("netns", "list").stdout]
    check(not left, "the nodes' namespaces are removed with the cluster", str(left))
    # A caller on every node (started by srun, sbatch), as the per-machine path runs.
    with SlurmCluster() as cluster:
        # (Slurm 22.05 refuses text after the last bracket, "a[1-2]b", which later versions
        # and mpify accept: not compared.)
        for expression in HOSTLISTS:
            ours = subprocess.run([hostlist, expression], capture_output=True, text=True)
            theirs = subprocess.run(["scontrol", "show", "hostnames", expression], env=cluster.env,
                                    capture_output=True, text=True)
            check(ours.returncode == 0 and theirs.returncode == 0 and ours.stdout.split() == theirs.stdout.split(),
                  f"hostlist {expression} expands as scontrol's",
                  f"ours {ours.stdout.split()} {ours.stderr.strip()}, scontrol's {theirs.stdout.split()} "
                  f"{theirs.stderr.strip()}")
        places = cluster.srun("bash", "-c", "echo node=$SLURM_NODEID of $SLURM_NNODES in $SLURM_STEP_NODELIST")
        check("node=0 of 2 in n[1-2]" in places.stdout and "node=1 of 2 in n[1-2]" in places.stdout,
              "srun -N2 -n2 starts one task on each of n1 and n2", places.stdout + places.stderr)
        # n1 and n2 are this machine's 127.0.0.1 but not names it resolves: the master is
        # given as an address; its port comes from the job id.
        run = cluster.srun(caller, "allreduce", "2", "30000", MASTER_ADDR="127.0.0.1")
        check(run.returncode == 0 and run.stdout.count("allreduce = 6") == 2,
              "srun: two callers, 2 ranks each, form one group of 4 (0+1+2+3 on both)", run.stdout + run.stderr)
        check(run.stdout.count("4 of 4 ranks consistent") == 2 and "GROUP_RANK=0" in run.stdout,
              "srun: torchrun's variables in every rank", run.stdout)
        # A program run straight from the batch script (no srun) is told to use srun.
        batch = subprocess.run(["sbatch", "--wait", "-N2", "--ntasks-per-node=1", "-o", f"{cluster.folder}/batch.out",
                                "--wrap", f"{caller} allreduce 2 5000"], env=cluster.env, capture_output=True,
                               text=True, timeout=300)
        with open(f"{cluster.folder}/batch.out") as out:
            said = out.read()
        check(batch.returncode != 0 and "this is the job's batch script" in said,
              "a program run by sbatch's script without srun is told to use srun", said + batch.stderr)
        if example:
            # The example's own sbatch script, from the repository's root (batches capped).
            job = subprocess.run(["sbatch", "--wait", f"--chdir={example}", f"--output={cluster.folder}/intro.out",
                                  "--export=ALL,MASTER_ADDR=127.0.0.1,MPIFY_LEARNER_MAX_BATCHES=5",
                                  "examples/launch/intro.sbatch"], env=cluster.env, capture_output=True, text=True,
                                 timeout=600)
            with open(f"{cluster.folder}/intro.out") as out:
                said = out.read()
            check(job.returncode == 0 and said.count("on 4 ranks") == 2,
                  "examples/launch/intro.sbatch trains intro on 2 nodes x 2 ranks", said + job.stderr)


def no_step_left(cluster, job, when, within=5):
    deadline = time.monotonic() + within
    while True:
        steps = subprocess.run(["squeue", "--noheader", "--steps", f"--jobs={job}"], env=cluster.env,
                               capture_output=True, text=True)
        if steps.stdout.strip() == "" or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # srun's steps end as their tasks do: asked again until then
    check(steps.returncode == 0 and steps.stdout.strip() == "",
          f"Placement::slurm {when}: no step of the allocation is left running", steps.stdout + steps.stderr)


def allocation_of_two_nodes(cluster, purpose):
    """salloc --no-shell -N2: the job id (None if refused, a failed check) and the
    environment a caller outside it runs in."""
    granted = subprocess.run(["salloc", "--no-shell", "--immediate=60", "-N2"], env=cluster.env, capture_output=True,
                             text=True, timeout=120)
    found = re.search(r"Granted job allocation (\d+)", granted.stderr + granted.stdout)
    check(found is not None, f"salloc --no-shell -N2 grants an allocation{purpose}", granted.stdout + granted.stderr)
    # n1 and n2 are names only Slurm knows: the caller is told its address.
    return (found.group(1) if found else None), dict(cluster.env, MPIFY_TEST_CALLER_ADDRESS=cluster.caller_address)


def start_hanging_call(remote_caller, job, env):
    """A call of Placement::slurm(1, job) without a caller rank whose workers print their
    pid and wait (rank 0 on n1, rank 1 on n2): the caller, its output so far and
    {rank: worker pid} once both are running (fewer if the call ended first, or if no
    marker came within 2 minutes: the caller is then killed)."""
    caller = subprocess.Popen([remote_caller, "hang", f"slurm:{job}", "1", "0", "n1", "n2"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    patience = threading.Timer(120, caller.kill)
    patience.start()
    seen, workers = "", {}
    while len(workers) < 2:
        line = caller.stdout.readline()
        if not line:
            break
        seen += line
        marker = re.search(r"\[rank (\d+)@[^]]*\] pid (\d+) marker", line)
        if marker:
            workers[int(marker.group(1))] = int(marker.group(2))
    patience.cancel()
    return caller, seen, workers


def slurm_placement_cases(cluster, remote_caller):
    """One caller outside the allocation (a login node), its ranks steps of the
    allocation through Placement::slurm: results, tagged lines, in_ddp; then the same
    caller as if inside it (salloc's variables)."""
    job, env = allocation_of_two_nodes(cluster, "")
    if job is None:
        return
    try:
        run = subprocess.run([remote_caller, "report", f"slurm:{job}", "2", "60000", "n1", "n2"], env=env,
                             capture_output=True, text=True, timeout=180)
        check(run.returncode == 0 and all(f"rank {r}: pid" in run.stdout for r in range(5)) and "done" in run.stdout,
              "Placement::slurm: 2 nodes x 2 ranks and the caller return their results by rank", run.stdout + run.stderr)
        check("[rank 4@" in run.stdout and "] line 0 of rank 3" in run.stdout,
              "Placement::slurm: the steps' lines come back tagged [rank k@host]", run.stdout)
        run = subprocess.run([remote_caller, "ddp", f"slurm:{job}", "2", "120000", "n1", "n2"], env=env,
                             capture_output=True, text=True, timeout=300)
        check(run.returncode == 0 and "allreduce = 10" in run.stdout and "parameters match one process: yes" in run.stdout,
              "Placement::slurm: in_ddp over the caller and 2 nodes x 2 ranks trains as one process",
              run.stdout + run.stderr)
        # A rank on n2 skips an all-reduce: the timeout's error names it, where it spins (read
        # on n2), and the call the others wait in.
        run = subprocess.run([remote_caller, "skip", f"slurm:{job}", "2", "8000", "n1", "n2"], env=env,
                             capture_output=True, text=True, timeout=120)
        check(run.returncode == 1 and "rank 0 waits in allreduce #3 (mpify::ddp::all_reduce" in run.stdout
              and re.search(r"rank 4 on \S+ never entered #3: its last was allreduce #2 .*; it is in "
                            r"in_library::spin_in_own_loop\(\) at functions\.cpp:\d+ "
                            r"<- ddp_test::skip_one_all_reduce", run.stdout) is not None,
              "Placement::slurm: a rank on n2 that skips an all-reduce is named at the timeout, with where it is "
              "and the call the other ranks wait in", run.stdout + run.stderr)
        # Inside, without being told its address: n1 does not resolve here, Slurm's NodeAddr does.
        inside = dict(env, SLURM_JOB_ID=job, SLURM_JOB_NODELIST="n[1-2]")
        del inside["MPIFY_TEST_CALLER_ADDRESS"]
        run = subprocess.run([remote_caller, "report", "slurm", "1", "60000", "n1", "n2"], env=inside,
                             capture_output=True, text=True, timeout=180)
        check(run.returncode == 0 and "rank 2: pid" in run.stdout,
              "Placement::slurm inside the allocation: its nodes from SLURM_JOB_NODELIST, the caller's address "
              "toward them from Slurm's NodeAddr", run.stdout + run.stderr)
        no_step_left(cluster, job, "after the calls")
        shipping_case(cluster, job, env, remote_caller)
        rebuilt_library_case(cluster, job, env, remote_caller)
        unreachable_port_case(cluster, job, env, remote_caller)
        # A remote worker SIGKILLed mid-call, then an interrupt mid-call: each ends the call
        # with a clear error in time, and leaves no step.
        for how in ("a worker killed", "an interrupt"):
            caller, seen, workers = start_hanging_call(remote_caller, job, env)
            check(sorted(workers) == [0, 1], f"Placement::slurm, {how}: both remote workers run first", seen)
            if sorted(workers) != [0, 1]:
                caller.kill()
                caller.communicate()
                continue
            at = time.monotonic()
            if how == "a worker killed":
                os.kill(workers[1], signal.SIGKILL)
            else:
                caller.send_signal(signal.SIGINT)
            try:
                out, _ = caller.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                caller.kill()
                out, _ = caller.communicate()
            elapsed = time.monotonic() - at
            if how == "a worker killed":
                check(caller.returncode == 1 and "SIGKILL" in out and "rank " in out and elapsed < 5,
                      f"Placement::slurm: a remote worker SIGKILLed is an error naming it within 5 s "
                      f"({elapsed:.1f} s)", seen + out)
            else:
                check(caller.returncode == 1 and "nterrupted" in out and elapsed < 2,
                      f"Placement::slurm: an interrupt ends the call within 2 s ({elapsed:.1f} s)", seen + out)
            no_step_left(cluster, job, f"after {how}")
    finally:
        subprocess.run(["scancel", job], env=cluster.env, capture_output=True)


def shipping_case(cluster, job, env, remote_caller):
    """A load_source library compiled by the caller: n1 sees the caller's files, n2 does
    not (its private mount namespace): found at its path on n1, shipped once to n2."""
    run = subprocess.run([remote_caller, "ship", f"slurm:{job}", "2", "60000", "n1", "n2"], capture_output=True,
                         text=True, timeout=300,
                         env=dict(env, MPIFY_DEBUG="1", MPIFY_CACHE_DIR=cluster.caller_cache,
                                  MPIFY_TEST_SOURCE=os.path.join(cluster.folder, "cell.cpp")))
    out = run.stdout + run.stderr
    library = re.search(r"^library: (\S+)$", run.stdout, re.M)
    shipped = os.path.join(cluster.caller_cache, "shipped")
    copies = os.listdir(shipped) if os.path.isdir(shipped) else []
    copy = os.path.join(shipped, copies[0]) if copies else "?"
    where = library.group(1) if library else "?"
    expected = [f"call {c} rank {r}: square {9 + r} from {where if r < 3 else copy}" for c in (1, 2) for r in range(5)]
    check(run.returncode == 0 and len(copies) == 1 and all(line in run.stdout for line in expected),
          "Placement::slurm: a load_source library runs from its path on n1 and from a shipped copy on n2", out)
    check(out.count("found at its path") == 4 and out.count("shipped (") == 1 and
          out.count("found in the machine's cache") == 3,
          "Placement::slurm: shipped once, to n2's first rank; found in n2's cache after", out)
    no_step_left(cluster, job, "after the shipped calls")


def rebuilt_library_case(cluster, job, env, remote_caller):
    """The edit-and-run-again loop from one caller process: a library rebuilt at its path
    (which n2 cannot see: it gets copies), and a load_source cell edited and loaded again.
    After each rebuild, every rank runs the new build, n2's from its node template too."""
    hidden = os.path.join(cluster.caller_cache, "load_source")
    run = subprocess.run([remote_caller, "rebuilt", f"slurm:{job}", "2", "60000", "n1", "n2"], capture_output=True,
                         text=True, timeout=300,
                         env=dict(env, MPIFY_DEBUG="1", MPIFY_CACHE_DIR=cluster.caller_cache,
                                  MPIFY_TEST_LIBRARY=os.path.join(hidden, "libversioned.so"),
                                  MPIFY_TEST_SOURCE=os.path.join(cluster.folder, "edited_cell.cpp")))
    out = run.stdout + run.stderr
    expected = ["built: 1 1 1 1", "rebuilt: 2 2 2 2", "rebuilt again: 2 2 2 2", "cell 1: 1 1 1 1", "cell 2: 2 2 2 2"]
    check(run.returncode == 0 and all(line in run.stdout.splitlines() for line in expected),
          "Placement::slurm: a library rebuilt at its path and an edited cell run as the new build on every rank, "
          "shipped or not, from the same caller process", out)
    check("was rebuilt since the template loaded its copy" in out,
          "Placement::slurm: n2's node template refuses a copy of the rebuilt library beside the old one", out)
    no_step_left(cluster, job, "after the rebuilt library's calls")


def unreachable_port_case(cluster, job, env, remote_caller):
    """n2 cannot reach the caller's port (Slurm's own traffic still flows): a clear error
    naming the launcher and the agent's words within 5 s of the caller's start."""
    cluster.cut_from_caller("n2")
    try:
        caller = subprocess.Popen([remote_caller, "report", f"slurm:{job}", "2", "60000", "n1", "n2"],
                                  env=dict(env, MPIFY_DEBUG="1"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        out, status, elapsed = seconds_after(caller, "launchers started", 120)
    finally:
        cluster.cut_from_caller("n2", cut=False)
    check(status == 1 and "on n2 saw its agent end before it connected back" in out and
          "cannot reach the caller's port" in out and elapsed is not None and elapsed < 5,
          f"Placement::slurm: the caller's port unreachable from n2 is an error naming it within 5 s of the "
          f"launch ({elapsed if elapsed is None else round(elapsed, 1)} s)", out)
    no_step_left(cluster, job, "after the unreachable port")


def mpirun_on_nodes_case(cluster, remote_caller):
    """Placement::mpirun over the same two machines: Open MPI reaches each node through its
    rsh agent (here a script that enters the node's namespaces, where a cluster has ssh)."""
    hosts = [cluster.node_addresses["n1"], cluster.node_addresses["n2"]]
    launcher = f"mpirun --allow-run-as-root --mca plm_rsh_agent {cluster.rsh_agent()}"
    run = subprocess.run([remote_caller, "report", launcher, "2", "60000", *hosts], env=clean_environment(),
                         capture_output=True, text=True, timeout=180)
    check(run.returncode == 0 and all(f"rank {r}: pid" in run.stdout for r in range(5)) and
          "[rank 4@n2]" in run.stdout and "[rank 1@n1]" in run.stdout,
          "Placement::mpirun over the two nodes: 2 x 2 ranks return their results, lines tagged with each node",
          run.stdout + run.stderr)
    deadline = time.monotonic() + 5
    while (cluster.node_processes("n1") or cluster.node_processes("n2")) and time.monotonic() < deadline:
        time.sleep(0.1)  # mpirun's daemons end after the call: watched, not awaited
    check(not cluster.node_processes("n1") and not cluster.node_processes("n2"),
          "Placement::mpirun: nothing but slurmd left on either node",
          str(cluster.node_processes("n1") + cluster.node_processes("n2")))


def notebook_on_allocation_case(cluster, notebook):
    """The intro notebook run by mpify's kernel as Jupyter started in salloc's shell would
    be (SLURM_JOB_ID and the node list in its environment): its "On other machines" cell
    trains with rank 1 a step on n1, the kernel rank 0 on this login node, told nothing of
    where it runs (the caller's address toward n1 comes from Slurm's NodeAddr)."""
    job, env = allocation_of_two_nodes(cluster, " (the notebook's)")
    if job is None:
        return
    runner, source, out = notebook
    try:
        inside = dict(env, SLURM_JOB_ID=job, SLURM_JOB_NODELIST="n[1-2]", MPIFY_LEARNER_MAX_BATCHES="5",
                      MPIFY_CACHE_DIR=cluster.caller_cache)
        del inside["MPIFY_TEST_CALLER_ADDRESS"]
        workdir = os.path.join(cluster.folder, "notebook")
        run = subprocess.run(shlex.split(runner) + [source, "--out", out, "--workdir", workdir, "--expect",
                                                    "in_ddp with rank 1 on the allocation: accuracy"],
                             env=inside, capture_output=True, text=True, timeout=400)
        check(run.returncode == 0, "the intro notebook, in Jupyter inside an allocation, trains with rank 1 a step "
              "on a node", (run.stdout + run.stderr)[-3000:])
        no_step_left(cluster, job, "after the notebook")
    finally:
        subprocess.run(["scancel", job], env=cluster.env, capture_output=True)


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def command_name(pid):
    with open(f"/proc/{pid}/comm") as comm:
        return comm.read().strip()


def is_gone(pid):
    """True once `pid` is no process (or only a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def mpify_processes(cluster, node):
    """mpify's processes (agents, workers) in `node`'s network namespace."""
    names = []
    for pid in cluster.node_processes(node):
        try:
            names.append(command_name(pid))
        except FileNotFoundError:
            pass
    return [name for name in names if "mpify" in name]


def lost_machine_case(cluster, remote_caller):
    """in_ddp over the caller and 2 nodes x 2 ranks with one restart and
    Options::min_ranks, its first attempt waiting: n2 falls silent (the caller's address
    cut from it), or its processes are killed, and the call restarts on the caller and
    n1's two ranks; with min_ranks above what is left: a clear error, no restart. Nothing
    of mpify's is left on either node."""
    job, env = allocation_of_two_nodes(cluster, " (a machine is lost)")
    if job is None:
        return
    try:
        for how, min_ranks in (("falls silent", 3), ("is killed", 3), ("is killed", 5)):
            caller = subprocess.Popen([remote_caller, f"shrink:{min_ranks}", f"slurm:{job}", "2", "180000", "n1", "n2"],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            patience = threading.Timer(180, caller.kill)
            patience.start()
            seen = ""
            while seen.count(" of 5 waits") < 5:
                line = caller.stdout.readline()
                if not line:
                    break
                seen += line
            check(seen.count(" of 5 waits") == 5, f"a machine {how}: the 5 ranks of the first attempt wait", seen)
            at = time.monotonic()
            if how == "falls silent":
                cluster.cut_from_caller("n2")
            else:
                for pid in cluster.node_processes("n2"):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            out = seen + caller.stdout.read()
            caller.wait()
            elapsed = time.monotonic() - at
            patience.cancel()
            if how == "falls silent":
                cluster.cut_from_caller("n2", cut=False)
            if min_ranks == 3:
                check(caller.returncode == 0 and "shrunk: world 3 sum 6 restart 1" in out and
                      "restart 1 of 1 on 3 ranks, without n2" in out and
                      ("was lost: nothing came from it" if how == "falls silent" else "was lost: its connection closed")
                      in out, f"min_ranks 3: n2 {how}, and in_ddp restarts on the caller and n1's 2 ranks "
                      f"({elapsed:.1f} s from the loss to the result)", out)
            else:
                check(caller.returncode == 1 and "was lost" in out and
                      "without n2 the machines that answer hold 3 ranks, fewer than Options::min_ranks = 5" in out and
                      "restart 1 of" not in out and elapsed < 10,
                      f"min_ranks 5: n2's processes killed, a clear error and no restart ({elapsed:.1f} s)", out)
            deadline = time.monotonic() + 6
            while (mpify_processes(cluster, "n1") or mpify_processes(cluster, "n2")) and time.monotonic() < deadline:
                time.sleep(0.2)  # n2's agent stops its worker 3 s after the caller fell silent: watched
            check(not mpify_processes(cluster, "n1") and not mpify_processes(cluster, "n2"),
                  f"a machine {how}: nothing of mpify's left on either node",
                  str(mpify_processes(cluster, "n1") + mpify_processes(cluster, "n2")))
    finally:
        subprocess.run(["scancel", job], env=cluster.env, capture_output=True)


def node_death_case(cluster, remote_caller):
    """A node dies in the middle of a call over Slurm: its slurmd and every process of the
    call's step on it (slurmstepd, the agent, the worker) SIGKILLed at once. The call must
    end with an error naming the rank within 5 s, and the other node's worker must be gone
    (the allocation's step on the dead node stays in Slurm's books until slurmctld gives the
    node up: not checked)."""
    job, env = allocation_of_two_nodes(cluster, " (a node dies)")
    if job is None:
        return
    caller, seen, workers = start_hanging_call(remote_caller, job, env)
    try:
        check(sorted(workers) == [0, 1], "a node dies: both remote workers run first", seen)
        if sorted(workers) != [0, 1]:
            return
        # Rank 1's worker, its agent and the step's slurmstepd on n2 are the worker's line
        # of ancestors up to slurmstepd.
        doomed, pid = [], workers[1]
        while pid > 1 and len(doomed) < 6:
            doomed.append(pid)
            if command_name(pid).startswith("slurmstepd"):
                break
            pid = parent_of(pid)
        check(command_name(doomed[-1]).startswith("slurmstepd"), "a node dies: rank 1's slurmstepd is found",
              str(doomed))
        at = time.monotonic()
        cluster.slurmd["n2"].kill()
        for pid in doomed:
            os.kill(pid, signal.SIGKILL)
        try:
            out, _ = caller.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            caller.kill()
            out, _ = caller.communicate()
        elapsed = time.monotonic() - at
        check(caller.returncode == 1 and "rank 1" in out and elapsed < 5,
              f"a node's slurmd and its step killed: the call ends with an error naming rank 1 within 5 s "
              f"({elapsed:.1f} s)", seen + out)
        deadline = time.monotonic() + 5
        while not is_gone(workers[0]) and time.monotonic() < deadline:
            time.sleep(0.1)  # the other node's agent stops its worker when the call's link ends
        check(is_gone(workers[0]), "a node dies: the other node's worker is gone within 5 s", str(workers))
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.communicate()
        subprocess.run(["scancel", job], env=cluster.env, capture_output=True)


def mpirun_cases(caller, remote_caller):
    env = clean_environment()
    base = ["mpirun", "--allow-run-as-root", "-n", "2"]
    run = subprocess.run(base + ["-x", "MASTER_ADDR=127.0.0.1", "-x", "MASTER_PORT=29531", caller, "allreduce", "2",
                                 "30000"], env=env, capture_output=True, text=True, timeout=300)
    check(run.returncode == 0 and run.stdout.count("allreduce = 6") == 2,
          "mpirun -n 2: two callers, 2 ranks each, form one group of 4", run.stdout + run.stderr)
    check(run.stdout.count("4 of 4 ranks consistent") == 2, "mpirun: torchrun's variables in every rank", run.stdout)
    run = subprocess.run(base + [caller, "allreduce", "2", "30000"], env=env, capture_output=True, text=True,
                         timeout=120)
    check(run.returncode != 0 and run.stdout.count("mpirun -x MASTER_ADDR=") == 2,
          "mpirun without MASTER_ADDR: each caller says how to give it", run.stdout + run.stderr)
    # One caller, its ranks started by mpirun (Placement::mpirun) on the host "localhost".
    run = subprocess.run([remote_caller, "report", "mpirun --allow-run-as-root", "2", "60000", "localhost"], env=env,
                         capture_output=True, text=True, timeout=180)
    check(run.returncode == 0 and all(f"rank {r}: pid" in run.stdout for r in range(3)) and "[rank 2@" in run.stdout,
          "Placement::mpirun: 2 ranks started by mpirun return their results and tagged lines", run.stdout + run.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--caller", required=True)
    parser.add_argument("--hostlist", required=True)
    parser.add_argument("--remote-caller", required=True)
    parser.add_argument("--example-root", help="a repository whose build/bin/intro exists: run its sbatch script")
    parser.add_argument("--notebook-runner", help="the notebook runner's command (tests/kernel/run_notebook.py with "
                        "its options): run the intro notebook inside an allocation")
    parser.add_argument("--notebook", help="with --notebook-runner: the intro notebook")
    parser.add_argument("--notebook-out", help="with --notebook-runner: where the executed notebook goes")
    args = parser.parse_args()
    missing = [p for p in ("slurmctld", "slurmd", "srun", "scontrol", "mpirun") if shutil.which(p) is None]
    if not os.path.exists("/usr/sbin/munged"):
        missing.append("munged")
    if os.geteuid() != 0 or missing:
        print(f"SKIPPED: needs root and {', '.join(missing) or 'root'} (scripts/install-deps.sh installs them)")
        return SKIPPED
    notebook = (args.notebook_runner, args.notebook, args.notebook_out) if args.notebook_runner else None
    slurm_cases(args.caller, args.hostlist, args.remote_caller, args.example_root, notebook)
    mpirun_cases(args.caller, args.remote_caller)
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
