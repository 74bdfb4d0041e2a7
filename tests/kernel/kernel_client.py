"""A Jupyter client for mpify-kernel's tests: starts the kernel from its kernelspec, as
Jupyter does, and collects what one cell sends (Debian's python3-jupyter-client; run the
tests with /usr/bin/python3).

A test file builds on KernelTest and calls main() with its own tests.
"""
import argparse
import os
import queue
import shutil
import sys
import tempfile
import time
import unittest

from jupyter_client.manager import KernelManager

ARGS = None
# A 1x1 grayscale PNG, base64 (what a display bundle carries for image/png).
ONE_PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg=="


def children_of(pid):
    """The pids whose parent is `pid` (from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/{}/stat".format(entry)) as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(entry))
    return found


class Kernel:
    """One kernel process and a client, with helpers that collect a cell's messages."""

    def __init__(self, workdir):
        self.manager = KernelManager(kernel_name="mpify-cpp17")
        self.manager.start_kernel(cwd=workdir)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def close(self):
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=False)

    @property
    def pid(self):
        return self.manager.provisioner.pid if hasattr(self.manager, "provisioner") else self.manager.kernel.pid

    def start(self, code):
        return self.client.execute(code)

    def collect(self, msg_id, timeout=120, until=None):
        """iopub messages of request msg_id, each as (arrival time, type, content), up to
        the idle status (or until `until(message list)` is true); then the reply."""
        messages, deadline = [], time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no idle status within {} s; got {}".format(timeout, messages))
            try:
                message = self.client.get_iopub_msg(timeout=left)
            except queue.Empty:
                continue
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            messages.append((time.monotonic(), message["msg_type"], message["content"]))
            if until is not None and until(messages):
                return messages, None
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                if until is not None:
                    raise AssertionError("the cell ended before what was awaited: {}".format(messages))
                break
        return messages, self.reply(msg_id, timeout)

    def reply(self, msg_id, timeout=60):
        while True:
            reply = self.client.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"]

    def run(self, code, timeout=120):
        return self.collect(self.start(code), timeout)

    def run_answering(self, code, answers, timeout=60):
        """Runs `code` with input allowed, answering its input_requests with `answers` in
        turn; returns (messages, reply, the input_requests' contents)."""
        msg_id = self.client.execute(code, allow_stdin=True)
        asked, answers, deadline = [], list(answers), time.monotonic() + timeout
        while answers and time.monotonic() < deadline:
            try:
                request = self.client.get_stdin_msg(timeout=0.1)
            except queue.Empty:
                continue
            asked.append(request["content"])
            self.client.input(answers.pop(0))
        messages, reply = self.collect(msg_id, timeout)
        return messages, reply, asked

    def request(self, send):
        msg_id = send()
        return self.reply(msg_id)


def stream_text(messages, name=None):
    return "".join(c["text"] for _, t, c in messages if t == "stream" and (name is None or c["name"] == name))


def results(messages):
    """The execute_result bundles of a cell (its Out[n])."""
    return [c["data"] for _, t, c in messages if t == "execute_result"]


def errors(messages):
    return [c for _, t, c in messages if t == "error"]


class KernelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="mpify-kernel-test-")
        cls.kernel = Kernel(cls.workdir)

    @classmethod
    def tearDownClass(cls):
        cls.kernel.close()
        shutil.rmtree(cls.workdir, ignore_errors=True)  # what cells wrote (%%file)

    def assert_ok(self, code, timeout=120):
        messages, reply = self.kernel.run(code, timeout)
        self.assertEqual(reply["status"], "ok", "cell failed: {} {}".format(reply, errors(messages)))
        self.assertEqual(errors(messages), [])
        return messages

    def assert_error(self, code, timeout=120):
        messages, reply = self.kernel.run(code, timeout)
        self.assertEqual(reply["status"], "error", "cell should have failed: {}".format(messages))
        self.assertEqual(len(errors(messages)), 1)
        return errors(messages)[0], messages




def main():
    """Reads --jupyter-path, --include-dir, --lib-dir (and --build-dir), then runs the
    calling file's tests."""
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--jupyter-path", required=True)
    parser.add_argument("--include-dir", required=True)
    parser.add_argument("--lib-dir", required=True)
    parser.add_argument("--build-dir")
    ARGS, rest = parser.parse_known_args()
    ARGS.include_dir, ARGS.lib_dir = os.path.abspath(ARGS.include_dir), os.path.abspath(ARGS.lib_dir)
    os.environ["JUPYTER_PATH"] = ARGS.jupyter_path
    unittest.main(module="__main__", argv=[sys.argv[0]] + rest, verbosity=2)
