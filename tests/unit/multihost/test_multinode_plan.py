"""Multi-node playbooks (`nodes:`): validation with one-line file:line errors, the host count, and each node's
rendered unit (pure: no host contacted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakesession import FakeSession

from fleet import playbook
from fleet.deploy import ladder
from fleet.errors import InputError
from fleet.host import venvs
from fleet.host.facts import HostFacts
from fleet.host.render import API_KEY
from fleet.inventory import Host
from fleet.multihost import multinode, multinode_plan
from fleet.ssh.connect import ConnectOptions

BOOK = """name: two
model: {path: /models/m}
nodes: {count: 2, dist_port: 5757}
flags: {tp-size: 8, pp-size: 2}
ladder:
  - name: base
  - name: tp16
    flags: {tp-size: 16, pp-size: null}
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "two.yaml"
    p.write_text(text)
    return p


def hosts(n: int, address: str = "10.0.0.{}") -> list[Host]:
    return [Host(name=f"n{i}", address=address.format(i + 1), port=None, user=None, become=False, identity_file=None,
                 known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                 source=Path("hosts.yaml")) for i in range(n)]


def test_a_multi_node_playbook_loads(tmp_path):
    book = playbook.load(write(tmp_path, BOOK))
    assert (book.nodes.count, book.nodes.dist_port) == (2, 5757)
    assert playbook.load(write(tmp_path, BOOK.replace("nodes: {count: 2, dist_port: 5757}", ""))).nodes is None


@pytest.mark.parametrize("old,new,expected", [
    ("count: 2,", "count: 1,", r"two.yaml:3: nodes.count: Input should be greater than or equal to 2"),
    ("dist_port: 5757", "dist_port: 30000", r"two.yaml:3: .*dist_port 30000 is serve.port too"),
    ("dist_port: 5757", "dist_port: 5757, ranks: 2", r"two.yaml:3: nodes.ranks: unknown key"),
    ("pp-size: 2}", "pp-size: 2, node-rank: 1}", r"two.yaml:4: .*--node-rank is set by fleet from nodes:"),
    ("  - name: base\n", "  - name: base\n    flags: {dist-init-addr: '1.2.3.4:5'}\n",
     r"two.yaml:7: .*--dist-init-addr is set by fleet"),
    ("  - name: tp16\n    flags: {tp-size: 16, pp-size: null}", "  - name: tp3\n    flags: {tp-size: 3, pp-size: null}",
     r"two.yaml:7: .*rung tp3: TP x PP = 3 x 1 does not split over 2 nodes"),
])
def test_bad_nodes_sections_fail_with_one_line_naming_the_line(tmp_path, old, new, expected):
    assert old in BOOK
    with pytest.raises(InputError, match=expected) as err:
        playbook.load(write(tmp_path, BOOK.replace(old, new)))
    assert "\n" not in str(err.value)


def test_the_shipped_two_node_sample_loads_and_splits(tmp_path):
    book = playbook.load(Path("playbooks/glm5-2node.yaml"))
    assert book.nodes and book.nodes.count == 2
    for rung in book.ladder:
        flags = playbook.merged_flags(book.flags, rung)
        assert int(flags["tp-size"]) * int(flags["pp-size"]) % book.nodes.count == 0


@pytest.mark.parametrize("count,message", [
    (1, "spans 2 nodes (nodes.count): give exactly 2 hosts with --host/--group, rank 0 first; got 1 (n0)"),
    (3, "give exactly 2 hosts with --host/--group, rank 0 first; got 3 (n0, n1, n2)"),
    (0, "got 0"),
])
def test_the_host_count_must_match_the_nodes(tmp_path, count, message):
    book = playbook.load(write(tmp_path, BOOK))
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        multinode_plan.check_hosts(book, hosts(count))


def test_a_host_given_twice_is_refused(tmp_path):
    book = playbook.load(write(tmp_path, BOOK))
    with pytest.raises(InputError, match="a host is given twice"):
        multinode_plan.check_hosts(book, [hosts(1)[0], hosts(1)[0]])


def test_each_node_gets_its_rank_and_rank_0s_address_in_its_own_unit(tmp_path):
    path = write(tmp_path, BOOK)
    book = playbook.load(path)
    nodes = hosts(2)
    made = multinode.MultiNode(nodes, book, path, ConnectOptions(), lambda h: lambda m: None,
                               {API_KEY: "s3cret"})
    units = []
    for node in made.nodes:
        planned = node.deployer.serve.plan(book.ladder[0], "r1", None)
        tail = planned.argv[planned.argv.index("--nnodes"):]
        assert tail[:6] == ["--nnodes", "2", "--node-rank", str(node.rank), "--dist-init-addr", "10.0.0.1:5757"]
        assert "--tp-size" in planned.argv and planned.argv.index("--tp-size") < planned.argv.index("--nnodes")
        exec_start = next(ln for ln in planned.unit_text.splitlines() if ln.startswith("ExecStart="))
        assert f"--node-rank {node.rank} --dist-init-addr 10.0.0.1:5757" in exec_start
        assert "s3cret" not in planned.unit_text + planned.env_text  # on every node, the key is a credential
        assert "LoadCredential=api-key:/etc/fleet/sglang.key" in planned.unit_text and planned.key == "s3cret"
        units.append(planned.unit_text)
    assert units[0] != units[1]


def test_an_ipv6_rank_0_is_bracketed(tmp_path):
    book = playbook.load(write(tmp_path, BOOK))
    assert multinode_plan.node_args(book, hosts(2, "fd00::{}"), 1) == [
        "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "[fd00::1]:5757"]


def test_a_node_s_sglang_is_the_probed_one_in_a_deploy_and_the_release_s_record_in_a_rollback(tmp_path):
    """A rollback or restore probes nothing, so the node has no facts: its journal is read with the sglang the
    release being started recorded (before: AttributeError 'Node' object has no attribute 'facts', so every
    multi-node rollback that had to go back said 'going back ... failed too' while both nodes could serve)."""
    from fleet.host.releases import Release

    path = write(tmp_path, BOOK)
    book = playbook.load(path)
    node = multinode.MultiNode(hosts(2), book, path, ConnectOptions(), lambda h: lambda m: None, {}).nodes[1]
    assert node.sglang is None  # nothing probed, nothing to start yet
    node.previous = Release(id="r0", host="n1", playbook="two", playbook_sha256="0" * 64, created="now",
                            facts={"versions": {"sglang": "0.5.9"}})
    assert node.sglang == "0.5.9"
    node.previous.facts = {"versions": {"sglang": "../../etc"}}  # what a host's manifest holds is data
    assert node.sglang is None


# ---------------------------------------------------------------------- packages: on every node


class Built:
    """Deployer.use_pins on each node: the pins' venv, or VenvError on the nodes named."""

    def __init__(self, fail: set[str]):
        self.fail, self.calls = fail, []

    def __call__(self, conn, serve, say):
        self.calls.append(serve.origin.name)
        if serve.origin.name in self.fail:
            raise venvs.VenvError(f"{serve.origin.name}: building the venv {VENV} failed (exit 72): no space")
        return serve.in_venv(VENV), venvs.Venv(VENV, VENV[-16:], "3.11", built="pip",
                                               sent=["sglang-0.5.9-py3-none-any.whl"])


VENV = "/var/lib/fleet/venvs/0123456789abcdef"
PINNED = BOOK + "packages: {sglang: 0.5.9}\n"


def pinned_nodes(tmp_path, monkeypatch, fail: set[str]) -> tuple[multinode.MultiNode, Built, list[str]]:
    book = playbook.load(write(tmp_path, PINNED))
    built, probed = Built(fail), []
    monkeypatch.setattr(ladder, "with_pins", built)

    class Session(FakeSession):
        def probe(self, say=None):
            probed.append(self.host.venv)
            return HostFacts(host=self.host.name, address=self.host.address)

    mn = multinode.MultiNode(hosts(2), book, tmp_path / "two.yaml", ConnectOptions(), lambda h: (lambda m: None))
    for n in mn.nodes:
        n.session, n.conn, n.previous = Session(n.host), None, None  # type: ignore[assignment]
    return mn, built, probed


def test_every_node_gets_the_pins_venv_and_is_probed_in_it_before_any_is_stopped(tmp_path, monkeypatch):
    mn, built, probed = pinned_nodes(tmp_path, monkeypatch, set())
    assert mn._pinned() is True
    assert built.calls == ["n0", "n1"] and probed == [VENV, VENV]
    assert [n.result.venv.path for n in mn.nodes] == [VENV, VENV]
    assert all(n.deployer.host.venv == VENV and n.host.venv == "/root/ml-env" for n in mn.nodes)  # origin kept


def test_a_node_that_cannot_build_the_venv_refuses_the_deployment_on_every_node(tmp_path, monkeypatch):
    mn, built, _ = pinned_nodes(tmp_path, monkeypatch, {"n1"})
    assert mn._pinned() is False
    assert built.calls == ["n0", "n1"]
    for n in mn.nodes:
        assert n.result.error == (f"n1: building the venv {VENV} failed (exit 72): no space; nothing was stopped "
                                  "on any node")
