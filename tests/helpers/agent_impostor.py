#!/usr/bin/env python3
"""Stands in a remote rank's launcher between /bin/sh and the agent, as a hostile or
mismatched machine would (remote_test.cpp uses it as the placement's command template):

  agent_impostor.py strangers %C   before the real agent starts, strangers knock on the
                                   caller's port: one silent, one with garbage, one with a
                                   proof under a wrong secret, one sending a byte a
                                   second; then the real agent runs (its stdin, with the
                                   call's secret, untouched).
  agent_impostor.py flood FLOODER DIR %C
                                   rank 1's launcher starts a stranger that floods the
                                   caller's port with new connections (FLOODER,
                                   mpify_test_connection_flood, for up to 8 s; its count
                                   and time in DIR/flood), and its real agent once the
                                   flood is on, and ends after both; the other ranks'
                                   agents start at once.
  agent_impostor.py version %C     an agent of another mpify: proves the call's secret
                                   (the first line of stdin), then says hello as mpify
                                   0.0.0-impostor, and waits for the caller to hang up.
  agent_impostor.py torch V %C     the same, as mpify V (the caller's) built with
                                   LibTorch 0.0.0-impostor.

%C is `env MPIFY_CONNECT=tcp:ADDRESS:PORT MPIFY_CONNECT_RANK=R .../mpify-worker`. The
protocol is contract/remote_link.hpp's and common/secret_handshake.hpp's, written again
here from their descriptions."""
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import sys
import time

MAGIC = b"MPIFYCB1"
IMPOSTOR_VERSION = "0.0.0-impostor"


def agent_settings(command):
    settings = dict(word.split("=", 1) for word in command[1:] if "=" in word)
    address, port = settings["MPIFY_CONNECT"][len("tcp:"):].rsplit(":", 1)
    return address, int(port), int(settings["MPIFY_CONNECT_RANK"])


def read_exactly(connection, size):
    data = b""
    while len(data) < size:
        more = connection.recv(size - len(data))
        if not more:
            raise ConnectionError("the caller closed the connection")
        data += more
    return data


def answer(challenge, key, rank):
    caller_nonce = challenge[len(MAGIC):]
    worker_nonce = os.urandom(32)
    rank_field = struct.pack("<I", rank)
    proof = hmac.new(key, b"mpify worker" + caller_nonce + worker_nonce + rank_field, hashlib.sha256).digest()
    return MAGIC + worker_nonce + rank_field + proof


def strangers(command):
    address, port, rank = agent_settings(command)
    knocks = []
    for sent in (b"", b"GET / HTTP/1.0\r\n\r\n" + os.urandom(200)):
        knock = socket.create_connection((address, port))
        knock.sendall(sent)
        knocks.append(knock)
    wrong = socket.create_connection((address, port))
    wrong.sendall(answer(read_exactly(wrong, 40), os.urandom(32), rank))
    knocks.append(wrong)
    if os.fork() == 0:  # a byte a second, until the caller drops it
        slow = socket.create_connection((address, port))
        try:
            while True:
                slow.sendall(b"M")
                time.sleep(1)
        except OSError:
            os._exit(0)
    os.execvp(command[0], command)


def flood(flooder, folder, command):
    address, port, rank = agent_settings(command)
    if rank == 1:
        # It ends when the port refuses connections (every agent is in), or with the
        # launcher's process group.
        stranger = subprocess.Popen([flooder, address, str(port), "8", os.path.join(folder, "flood")],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        stranger.stdout.readline()  # "flooding": its first connections are open
        agent = subprocess.run(command)
        # Its report is written when it ends: before this launcher does, and so before the call returns.
        stranger.wait()
        sys.exit(agent.returncode)
    os.execvp(command[0], command)


def mismatched_version(command, mpify_version=IMPOSTOR_VERSION, torch_version=None):
    address, port, rank = agent_settings(command)
    key = bytes.fromhex(sys.stdin.readline().strip())
    link = socket.create_connection((address, port))
    link.sendall(answer(read_exactly(link, 40), key, rank))
    read_exactly(link, 32)  # the caller's proof
    host = b"impostor-host"
    version = mpify_version.encode()
    payload = struct.pack("<I", len(version)) + version + struct.pack("<I", len(host)) + host + struct.pack("<q", os.getpid())
    if torch_version is not None:
        torch = torch_version.encode()
        payload += struct.pack("<I", len(torch)) + torch
    link.sendall(struct.pack("<BI", 1, len(payload)) + payload)  # hello
    while link.recv(4096):
        pass


def main():
    mode, command = sys.argv[1], sys.argv[2:]
    if mode == "strangers":
        strangers(command)
    elif mode == "flood":  # flood FLOODER DIR %C
        flood(command[0], command[1], command[2:])
    elif mode == "version":
        mismatched_version(command)
    elif mode == "torch":  # torch MPIFY_VERSION %C: the caller's mpify, another LibTorch
        mismatched_version(command[1:], mpify_version=command[0], torch_version=IMPOSTOR_VERSION)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
