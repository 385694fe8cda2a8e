"""torch.distributed's TCP rendezvous across nodes (SIMULATED), over real TCP between the sandbox hosts.

With --nnodes N > 1, sglang's init_process_group uses `tcp://<--dist-init-addr>`: global rank 0 hosts
the TCPStore on that port and waits for every other rank (its own node's too) to join; the others
connect to it, retrying until their timeout. Messages are torch 2.x's:

- rank 0, a rank never came: `torch.distributed.DistStoreError: Timed out after 1801 seconds waiting
  for clients. 8/16 clients joined.` (TCPStore.cpp waitForWorkers; torch's default timeout is 30 min,
  sglang passes --dist-timeout when given)
- a rank that cannot reach rank 0: `[c10d] The client socket has timed out after 1800000ms while trying
  to connect to (host, port).` then `torch.distributed.DistNetworkError: <the same>` (socket.cpp; sglang#2561)
- rank 0 gone while a rank waits: `torch.distributed.DistNetworkError: Failed to recv, got 0 bytes.
  Connection was likely closed. Did the remote server shutdown or crash?` (TCPStore.cpp)

After everyone joined, each connection stays open: a peer that dies closes it, and the survivors fail
as NCCL does when a remote rank exits (`ncclRemoteError`, "remote process exited or there was a
network error"). Timeouts are modelled seconds, scaled by SGLANG_SIM_TIME_SCALE like every phase.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime

from torch.distributed import DistNetworkError, DistStoreError

from sglang_sim_core import env

DEFAULT_TIMEOUT = 1800.0  # torch.distributed default_pg_timeout: 30 minutes
NCCL_VERSION = "2.27.5"


def parse_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


def _scaled(seconds: float) -> float:
    return max(seconds * env.time_scale(), 2.0)  # a floor: other nodes' processes need a moment to start


def _c10d_log(message: str) -> None:
    now = datetime.now()
    stamp = f"E{now:%m%d} {now:%H:%M:%S}.{now.microsecond * 1000:09d} {os.getpid()}"
    print(f"[{stamp} socket.cpp:1011] [c10d] {message}", file=sys.stderr, flush=True)


class Link:
    """The open connections of one rank after the rendezvous; losing any is a peer gone."""

    def __init__(self, socks: list[socket.socket], peers: list[str]) -> None:
        self.socks, self.peers = socks, peers

    def watch(self, on_lost: Callable[[str], None]) -> None:
        for sock, peer in zip(self.socks, self.peers, strict=True):
            threading.Thread(target=self._wait_eof, args=(sock, peer, on_lost), daemon=True).start()

    @staticmethod
    def _wait_eof(sock: socket.socket, peer: str, on_lost: Callable[[str], None]) -> None:
        sock.settimeout(None)
        try:
            while sock.recv(64):
                pass
        except OSError:
            pass
        on_lost(peer)


def serve(port: int, world: int, timeout: float) -> Link:
    """Global rank 0: host the store, wait for world - 1 clients, then let them all go."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(256)
    start = time.monotonic()
    deadline = start + _scaled(timeout)
    clients: list[tuple[socket.socket, str]] = []
    try:
        while len(clients) < world - 1:
            left = deadline - time.monotonic()
            if left <= 0:  # the joined clients learn of it when this process exits (their connection closes)
                raise DistStoreError(f"Timed out after {int(timeout) + 1} seconds waiting for clients. "
                                     f"{len(clients) + 1}/{world} clients joined.")
            srv.settimeout(min(left, 0.5))
            try:
                sock, addr = srv.accept()
            except TimeoutError:
                continue
            sock.settimeout(max(deadline - time.monotonic(), 0.1))
            try:
                hello = sock.recv(64).decode(errors="replace").split()
            except OSError:
                sock.close()
                continue
            if len(hello) == 2 and hello[0] == "rank":
                clients.append((sock, f"rank {hello[1]} at {addr[0]}"))
            else:
                sock.close()
        for sock, _ in clients:
            sock.sendall(b"go\n")
    finally:
        srv.close()
    return Link([s for s, _ in clients], [p for _, p in clients])


def join(host: str, port: int, rank: int, timeout: float) -> Link:
    """Any other rank: connect to rank 0's store, retrying until the timeout, then wait for the go."""
    deadline = time.monotonic() + _scaled(timeout)
    ms = int(timeout * 1000)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            message = f"The client socket has timed out after {ms}ms while trying to connect to ({host}, {port})."
            _c10d_log(message)
            raise DistNetworkError(message)
        try:
            sock = socket.create_connection((host, port), timeout=min(left, 2.0))
            break
        except OSError:
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))
    sock.sendall(f"rank {rank}\n".encode())
    sock.settimeout(None)  # rank 0 ends the wait: with the go, or by failing (the connection closes)
    try:
        reply = sock.recv(64)
    except OSError:
        reply = b""
    if not reply.startswith(b"go"):
        sock.close()
        raise DistNetworkError("Failed to recv, got 0 bytes. Connection was likely closed. "
                               "Did the remote server shutdown or crash?")
    return Link([sock], [f"rank 0 at {host}:{port}"])


def remote_error(peer: str) -> str:
    """What NCCL reports in the survivors when a rank of the group went away."""
    return (f"torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            f"ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, NCCL version "
            f"{NCCL_VERSION}\nncclRemoteError: A call failed possibly due to a network error or a remote "
            f"process exiting prematurely.\nLast error:\nsocketProgress: Connection closed by remote peer ({peer})")
