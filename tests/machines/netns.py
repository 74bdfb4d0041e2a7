"""Two machines on one: network namespaces a and b joined by a veth pair, with
addresses that exist only inside them. Used by the two-machines test and benchmark."""
import os
import signal
import subprocess

from checks import check, verdict

SKIPPED = 77


def ip(*args, check_status=True):
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check_status and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


class TwoHosts:
    """Namespaces a (10.X.0.1) and b (10.X.0.2); removed, with whatever runs in them, on exit."""

    def __init__(self):
        tag = os.getpid() % 100000
        self.names = {"a": f"mpify-a{tag}", "b": f"mpify-b{tag}"}
        subnet = 100 + os.getpid() % 100
        self.addresses = {"a": f"10.{subnet}.0.1", "b": f"10.{subnet}.0.2"}
        self.links = {"a": f"mpva{tag}", "b": f"mpvb{tag}"}

    def __enter__(self):
        try:
            self._make()
        except BaseException:
            self.__exit__(None, None, None)  # whatever part was made
            raise
        return self

    def _make(self):
        for host in "ab":
            ip("netns", "add", self.names[host])
        ip("link", "add", self.links["a"], "type", "veth", "peer", "name", self.links["b"])
        for host in "ab":
            ns = self.names[host]
            ip("link", "set", self.links[host], "netns", ns)
            ip("-n", ns, "addr", "add", self.addresses[host] + "/24", "dev", self.links[host])
            ip("-n", ns, "link", "set", self.links[host], "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def __exit__(self, *exc):
        for host in "ab":
            self.kill_everything(host)
            ip("netns", "delete", self.names[host], check_status=False)
        ip("link", "delete", self.links["a"], check_status=False)  # when it never moved into a namespace

    def unanswering_neighbour(self, host):
        """An address on `host`'s link that nobody has: a route through it loses every packet."""
        return self.addresses[host].rsplit(".", 1)[0] + ".9"

    def gone(self):
        """Whether both namespaces are deleted."""
        left = ip("netns", "list").stdout
        return all(name not in left for name in self.names.values())

    def pids(self, host):
        return [int(p) for p in ip("netns", "pids", self.names[host]).stdout.split()]

    def kill_everything(self, host):
        for pid in self.pids(host):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def listeners(self, host):
        """(local address, port) of every listening TCP socket in the namespace."""
        out = subprocess.run(["ip", "netns", "exec", self.names[host], "ss", "-Hltn"], capture_output=True,
                             text=True).stdout
        found = []
        for line in out.splitlines():
            local = line.split()[3]
            address, _, port = local.rpartition(":")
            found.append((address.strip("[]"), port))
        return found

    def start(self, host, caller, mode, n, node_rank, master, port, timeout_ms):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GLOO_", "MASTER_", "SLURM_", "OMPI_"))}
        env.update(NODE_RANK=str(node_rank), NNODES="2", MASTER_ADDR=master, MASTER_PORT=str(port))
        timeout = [] if timeout_ms is None else [str(timeout_ms)]
        return subprocess.Popen(["ip", "netns", "exec", self.names[host], caller, mode, str(n), *timeout],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_on_two_hosts(run_cases):
    """Runs run_cases(hosts) on fresh namespaces and removes them; the exit status (77:
    skipped, where namespaces cannot be made)."""
    if os.geteuid() != 0 or subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        print("SKIPPED: network namespaces need root and iproute2 (ip netns)")
        return SKIPPED
    try:
        hosts = TwoHosts().__enter__()
    except (RuntimeError, FileNotFoundError) as e:
        print(f"SKIPPED: cannot make two network namespaces here: {e}")
        return SKIPPED
    try:
        run_cases(hosts)
    finally:
        hosts.__exit__(None, None, None)
    check(hosts.gone(), "the namespaces are gone")
    return verdict()


def finish(process, within):
    """Its output and exit status, or (output, None) when it did not end within `within` s."""
    try:
        out, _ = process.communicate(timeout=within)
        return out, process.returncode
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
        return out, None
