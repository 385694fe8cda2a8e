"""The pure plan of a multi-node deployment: which hosts are its nodes, and the flags that make a host node `rank`
(rank 0's address as `--dist-init-addr`)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from fleet.errors import InputError
from fleet.inventory import Host
from fleet.playbook import Playbook


def check_hosts(book: Playbook, hosts: Sequence[Host]) -> None:
    """Bad input before any host is touched: exactly nodes.count distinct hosts."""
    assert book.nodes is not None
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        raise InputError(f"playbook {book.name}: a host is given twice ({', '.join(names)}); each node is one host")
    if len(hosts) != book.nodes.count:
        raise InputError(f"playbook {book.name} spans {book.nodes.count} nodes (nodes.count): give exactly "
                         f"{book.nodes.count} hosts with --host/--group, rank 0 first; got {len(hosts)}"
                         + (f" ({', '.join(names)})" if names else ""))


def dist_init_addr(book: Playbook, hosts: Sequence[Host]) -> str:
    assert book.nodes is not None
    address = hosts[0].address
    try:
        if ipaddress.ip_address(address).version == 6:
            address = f"[{address}]"
    except ValueError:
        pass  # a host name
    return f"{address}:{book.nodes.dist_port}"


def node_args(book: Playbook, hosts: Sequence[Host], rank: int) -> list[str]:
    """The sglang flags that make one host node `rank` of the server."""
    assert book.nodes is not None
    return ["--nnodes", str(book.nodes.count), "--node-rank", str(rank),
            "--dist-init-addr", dist_init_addr(book, hosts)]
