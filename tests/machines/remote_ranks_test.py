#!/usr/bin/env python3
"""One caller, ranks on another machine: the caller runs in network namespace a, its
remote ranks in namespace b, started by the command template "ip netns exec <b> %C"; the
agents connect back over the veth link to the caller's address on the route to b (no
loopback between them). The ranks return their results by rank and their lines come back
tagged with the host (and MPIFY_DEBUG logs the launchers' commands, never the secret);
a load_source library travels to b, whose view of the caller's files lacks it (a mount
namespace), once, and again when b's copy at that path is stale;
in_ddp forms one group of the caller's rank and theirs, which trains
as one process does; the caller's port unreachable from b and a link cut mid-call are
clear errors within 5 s; a caller killed mid-call leaves nothing running on a or b; a
flood of new connections from b locks no agent out; nothing is left listening anywhere.

  remote_ranks_test.py --caller build/bin/mpify_test_remote_caller \
                       --flooder build/bin/mpify_test_connection_flood

Needs root (ip netns); exits 77 (ctest: skipped) where namespaces cannot be made."""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from checks import check, seconds_after
from netns import finish, ip, run_on_two_hosts


def start(hosts, caller, mode, timeout_ms, per_host=2, debug=False, template=None, **variables):
    template = template or f"ip netns exec {hosts.names['b']} %C"
    env = dict(os.environ, **variables)
    if debug:
        env["MPIFY_DEBUG"] = "1"
    return subprocess.Popen(["ip", "netns", "exec", hosts.names["a"], caller, mode, template, str(per_host),
                             str(timeout_ms), hosts.addresses["b"]],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def wait_for_markers(process, count, within):
    deadline = time.monotonic() + within
    seen, markers = "", 0
    while markers < count and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen += line
        markers += "marker" in line
    return markers == count, seen


def nothing_left_on_b(hosts, what, within=5):
    deadline = time.monotonic() + within
    while hosts.pids("b") and time.monotonic() < deadline:
        time.sleep(0.1)
    check(not hosts.pids("b"), f"{what}: no process left on b", str(hosts.pids("b")))
    for host in "ab":
        check(not hosts.listeners(host), f"{what}: nothing listens on {host}", str(hosts.listeners(host)))


def flood_case(hosts, caller, flooder):
    """A stranger on b floods the caller's port with new connections, as fast as one
    process can, while the agents of a 1 + 2 x 2 call connect back: the call succeeds."""
    impostor = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers", "agent_impostor.py")
    folder = tempfile.mkdtemp(prefix="mpify-flood-")
    try:
        template = f"ip netns exec {hosts.names['b']} python3 {impostor} flood {flooder} {folder} %C"
        process = subprocess.Popen(["ip", "netns", "exec", hosts.names["a"], caller, "report", template, "2", "60000",
                                    hosts.addresses["b"], hosts.addresses["b"]],
                                   # the impostor wraps each rank's agent: a launcher per rank
                                   env=dict(os.environ, MPIFY_TEST_TEMPLATE_IDLE="0"),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, status = finish(process, 120)
        with open(os.path.join(folder, "flood")) as report:
            connections, seconds = (float(word) for word in report.read().split())
        check(status == 0 and all(f"rank {r}: pid" in out for r in range(5)) and "done" in out,
              f"a flood of new connections from b ({connections / seconds:.0f} a second) locks no agent of a "
              f"1 + 2 x 2 call out", out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    nothing_left_on_b(hosts, "after the flood")


def run_cases(hosts, caller):
    # Results by rank and tagged lines: 2 ranks on b, the caller's rank 0 on a.
    out, status = finish(start(hosts, caller, "report", 60000, debug=True), 120)
    check(status == 0 and "rank 1: pid" in out and "rank 2: pid" in out and "done" in out,
          "two ranks on b return their results to the caller on a", out)
    check(f"mpify debug: node template started: ip netns exec {hosts.names['b']} env " in out
          and f"mpify debug: rank 2 on {hosts.addresses['b']}: agent asked of the node template: " in out
          and "its worker was forked by the node template" in out
          and "every agent connected back" in out, "MPIFY_DEBUG logs the node template's command and the phases", out)
    check(re.search(r"[0-9a-f]{64}", out) is None, "the call's secret is in no output, the debug log's included", out)
    check("libmpify_test_functions.so found at its path (0 bytes sent" in out,
          "the functions' library, on a filesystem b shares, is found at its path on b", out)
    check("@" in out and "] line 0 of rank 2" in out and "[rank 1@" in out,
          "the remote ranks' lines come back tagged [rank k@host]", out)
    nothing_left_on_b(hosts, "after the call")

    # b cannot reach the caller's port (its route to a leads to a neighbour that never
    # answers): each agent gives up, its node template says so, and so does the caller.
    ip("-n", hosts.names["b"], "route", "add", hosts.addresses["a"] + "/32", "via", hosts.unanswering_neighbour("b"))
    out, status, elapsed = seconds_after(start(hosts, caller, "report", 60000, debug=True), "launchers started", 30)
    ip("-n", hosts.names["b"], "route", "del", hosts.addresses["a"] + "/32")
    check(status == 1 and "saw its agent end before it connected back" in out
          and "cannot reach the caller's port" in out
          and "does this machine reach that address" in out and elapsed is not None and elapsed < 5,
          "the caller's port unreachable from b: an error naming the launcher and why within 5 s of the launch "
          f"({elapsed if elapsed is None else round(elapsed, 1)} s)", out)
    nothing_left_on_b(hosts, "after the unreachable port")

    # in_ddp across the two: the store on a's address behind the secret, Gloo on each
    # side's address toward the other.
    out, status = finish(start(hosts, caller, "ddp", 120000), 240)
    check(status == 0 and "allreduce = 3" in out, "in_ddp over the caller on a and 2 ranks on b: one group of 3", out)
    check("parameters match one process: yes" in out,
          "DDP training across the two machines gives one process's parameters", out)
    nothing_left_on_b(hosts, "after in_ddp")

    # The link cut mid-call: the caller names the lost ranks within 5 s.
    caller_process = start(hosts, caller, "hang", 0)
    running, seen = wait_for_markers(caller_process, 2, 60)
    check(running, "both remote workers run (before the link is cut)", seen)
    cut_at = time.monotonic()
    ip("-n", hosts.names["b"], "link", "set", hosts.links["b"], "down")
    out, status = finish(caller_process, 10)
    elapsed = time.monotonic() - cut_at
    check(status == 1 and "was lost: " in out and "nothing came from it" in out and elapsed < 6,
          f"a cut link is an error naming the lost rank within 5 s ({elapsed:.1f} s)", seen + out)
    nothing_left_on_b(hosts, "after the cut link")
    ip("-n", hosts.names["b"], "link", "set", hosts.links["b"], "up")

    # The caller killed mid-call: the agents on b stop their workers and end.
    caller_process = start(hosts, caller, "hang", 0)
    running, seen = wait_for_markers(caller_process, 2, 60)
    check(running, "both remote workers run (before the caller is killed)", seen)
    os.kill(caller_process.pid, signal.SIGKILL)  # as a notebook's kernel restart does
    finish(caller_process, 10)
    nothing_left_on_b(hosts, "after the caller was killed")
    check(not hosts.pids("a"), "after the caller was killed: its stand-ins are gone too", str(hosts.pids("a")))


class PrivateFiles:
    """Machine b's own view of the files: a mount namespace (held by a process in netns b)
    where `hidden` is an empty tmpfs, so what the caller keeps there is not on b. Agents
    enter it with the template `nsenter -t PID -m -n %C`; leaving removes it and its mount."""

    def __init__(self, hosts, hidden):
        script = 'mount -t tmpfs -o mode=0700 mpify-test "$1" && echo ready && exec cat'
        self.holder = subprocess.Popen(["ip", "netns", "exec", hosts.names["b"], "unshare", "--mount",
                                        "--propagation", "private", "sh", "-c", script, "sh", hidden],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self.holder.stdout.readline().strip()
        if ready != "ready":
            self.leave()
            raise RuntimeError(f"cannot make b's private view of {hidden}")
        self.template = f"nsenter -t {self.holder.pid} -m -n %C"

    def run(self, *command):
        """Runs `command` in b's view of the files."""
        subprocess.run(["nsenter", "-t", str(self.holder.pid), "-m", *command], check=True)

    def leave(self):
        self.holder.stdin.close()  # cat ends, and with it the namespace and the tmpfs
        self.holder.wait(10)


def shipping_cases(hosts, caller):
    # The caller's load_source cache is on no shared filesystem: b sees an empty folder.
    with tempfile.TemporaryDirectory(prefix="mpify-ship-") as folder:
        cache = os.path.join(folder, "cache")
        os.makedirs(os.path.join(cache, "load_source"), mode=0o700)
        files_of_b = PrivateFiles(hosts, os.path.join(cache, "load_source"))
        try:
            run = lambda: finish(start(hosts, caller, "ship", 60000, debug=True, template=files_of_b.template,
                                       MPIFY_CACHE_DIR=cache, MPIFY_TEST_SOURCE=os.path.join(folder, "cell.cpp")),
                                 120)
            out, status = run()
            library = re.search(r"^library: (\S+)$", out, re.M)
            copies = os.listdir(os.path.join(cache, "shipped")) if os.path.isdir(os.path.join(cache, "shipped")) else []
            check(status == 0 and library and len(copies) == 1 and re.fullmatch(r"[0-9a-f]{64}\.so", copies[0]),
                  "a load_source library that b lacks is shipped into b's cache, named by its hash", out)
            copy = os.path.join(cache, "shipped", copies[0]) if copies else "?"
            expected = [f"call {c} rank 0: square 9 from {library.group(1) if library else '?'}" for c in (1, 2)]
            expected += [f"call {c} rank {r}: square {9 + r} from {copy}" for c in (1, 2) for r in (1, 2)]
            check(all(line in out for line in expected),
                  "both calls' ranks on b run the function from the shipped copy, rank 0 from the caller's", out)
            check(out.count("shipped (") == 1 and out.count("found in the machine's cache") == 3,
                  "shipped once: to the first rank on b of the first call; found in b's cache by the other three",
                  out)
            check(oct(os.stat(copy).st_mode & 0o777) == "0o500" and
                  oct(os.stat(os.path.join(cache, "shipped")).st_mode & 0o777) == "0o700",
                  "the shipped copy is read-only in a folder only its user can open", copy)

            # b has another file at the library's path (a stale copy) and no cache: shipped again.
            shutil.rmtree(os.path.join(cache, "shipped"))
            files_of_b.run("cp", "/bin/true", library.group(1) if library else "/nonexistent")
            out, status = run()
            check(status == 0 and out.count("shipped (") == 1 and "found at its path" not in out and
                  f"call 2 rank 2: square 11 from {copy}" in out,
                  "a stale copy at the library's path on b is not loaded: the caller's bytes are shipped", out)
            check(os.listdir(os.path.join(cache, "shipped")) == copies,
                  "nothing but the checked copy is left in b's cache", str(os.listdir(os.path.join(cache, "shipped"))))
        finally:
            files_of_b.leave()
    nothing_left_on_b(hosts, "after the shipped calls")


class Sshd:
    """OpenSSH's server in namespace b on its address, port 2222, with its own host key and
    one client key for root; stopped, with its files, on leaving. None when sshd is not
    installed."""

    def __init__(self, hosts, folder):
        self.folder = folder
        for key in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(folder, key)],
                           check=True)
        shutil.copy(os.path.join(folder, "client_key.pub"), os.path.join(folder, "authorized_keys"))
        config = os.path.join(folder, "sshd_config")
        with open(config, "w") as f:
            f.write(f"ListenAddress {hosts.addresses['b']}:2222\nHostKey {folder}/host_key\n"
                    f"AuthorizedKeysFile {folder}/authorized_keys\nPermitRootLogin prohibit-password\n"
                    "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                    f"PidFile {folder}/sshd.pid\n")
        # Its privilege-separation folder, made (and later removed) if the system has none.
        self.made_run_folder = not os.path.isdir("/run/sshd")
        if self.made_run_folder:
            os.makedirs("/run/sshd", mode=0o755)
        self.server = subprocess.Popen(["ip", "netns", "exec", hosts.names["b"], "/usr/sbin/sshd", "-D", "-e", "-f",
                                        config], stderr=subprocess.PIPE, text=True)
        said = self.server.stderr.readline()
        if "Server listening" not in said:
            self.stop()
            raise RuntimeError(f"sshd did not start: {said}")
        self.template = (f"ssh -T -p 2222 -i {folder}/client_key -o BatchMode=yes -o StrictHostKeyChecking=no "
                         "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR root@%H %C")

    def stop(self):
        self.server.terminate()
        self.server.wait(10)
        if self.made_run_folder:
            shutil.rmtree("/run/sshd", ignore_errors=True)


def ssh_cases(hosts, caller):
    # The ssh launcher against a real sshd on b: ssh passes the secret on through its stdin.
    if not os.path.exists("/usr/sbin/sshd"):
        check(False, "sshd is installed for the ssh launcher's test (scripts/install-deps.sh: openssh-server)")
        return
    with tempfile.TemporaryDirectory(prefix="mpify-sshd-") as folder:
        sshd = Sshd(hosts, folder)
        try:
            out, status = finish(start(hosts, caller, "report", 60000, debug=True, template=sshd.template), 120)
            check(status == 0 and "rank 2: pid" in out and "[rank 1@" in out and "] line 0 of rank 2" in out,
                  "ssh -T %H %C to a real sshd on b: results by rank and tagged lines", out)
            check(re.search(r"[0-9a-f]{64}", out) is None, "over ssh too, the secret is in no output", out)
            others = lambda: [pid for pid in hosts.pids("b") if pid != sshd.server.pid]

            # The node template ends once the caller has: its ssh session closes after the call.
            def only_sshd_left(what):
                deadline = time.monotonic() + 5
                while others() and time.monotonic() < deadline:
                    time.sleep(0.1)
                check(not others(), f"{what}: nothing but sshd left on b", str(others()))

            only_sshd_left("after the call over ssh")

            caller_process = start(hosts, caller, "hang", 0, template=sshd.template)
            running, seen = wait_for_markers(caller_process, 2, 60)
            check(running, "over ssh: both remote workers run (before the interrupt)", seen)
            at = time.monotonic()
            caller_process.send_signal(signal.SIGINT)
            out, status = finish(caller_process, 10)
            elapsed = time.monotonic() - at
            check(status == 1 and "nterrupted" in out and elapsed < 2,
                  f"over ssh: an interrupt ends the call within 2 s ({elapsed:.1f} s)", seen + out)
            only_sshd_left("after the interrupt over ssh")
        finally:
            sshd.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--caller", required=True)
    parser.add_argument("--flooder", required=True)
    args = parser.parse_args()
    return run_on_two_hosts(lambda hosts: (run_cases(hosts, args.caller), flood_case(hosts, args.caller, args.flooder),
                                           ssh_cases(hosts, args.caller), shipping_cases(hosts, args.caller)))


if __name__ == "__main__":
    sys.exit(main())
