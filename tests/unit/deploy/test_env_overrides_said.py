"""The inventory's vars.env over the playbook's env is said, not only shown as a diff line (issue 46, finding 8:
'silently overrides'; the fifth newcomer's dry run and deploy showed the env file's diff and never said that the
value came from the inventory over the playbook's serve.env). Deployer.plan says these lines in both."""

from __future__ import annotations

from pathlib import Path

from fleet import inventory, playbook
from fleet.deploy.serving import Serving
from fleet.inventory import Host

BOOK = """name: b
model: {path: /models/m}
serve:
  env: {CUDA_VISIBLE_DEVICES: "0,1", NCCL_P2P_DISABLE: "1", HF_TOKEN: {env: HF_TOKEN}}
ladder:
  - name: fast
    env: {NCCL_ALGO: Ring}
  - name: safe
"""


def _serving(tmp_path: Path, env: dict[str, object]) -> Serving:
    path = tmp_path / "b.yaml"
    path.write_text(BOOK)
    host = Host(name="gpu-1", address="10.0.0.1", port=22, user="root", become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                source=tmp_path / "hosts.yaml", vars={"env": env})
    return Serving.of(host, playbook.load(path), path)


def test_each_variable_the_inventory_replaces_is_said_with_both_values(tmp_path):
    serve = _serving(tmp_path, {"CUDA_VISIBLE_DEVICES": "1,0", "NCCL_ALGO": "Tree", "NCCL_P2P_DISABLE": "1",
                                "NCCL_SOCKET_IFNAME": "ens1"})
    assert serve.env_overrides(serve.book.ladder) == [
        "env CUDA_VISIBLE_DEVICES='1,0' from the inventory's vars.env of gpu-1, over serve.env '0,1'",
        "env NCCL_ALGO='Tree' from the inventory's vars.env of gpu-1, over rung fast's env 'Ring'",
    ]  # the same value (NCCL_P2P_DISABLE) and a variable of its own (NCCL_SOCKET_IFNAME) replace nothing


def test_a_secret_is_said_masked_and_its_playbook_value_never(tmp_path):
    serve = _serving(tmp_path, {"HF_TOKEN": "hf_site_own_token_value"})
    [line] = serve.env_overrides(serve.book.ladder)
    assert "hf_site_own" not in line and line.endswith("over serve.env"), line


INVENTORY = """
defaults: {vars: {env: {NCCL_IB_DISABLE: "1"}}}
groups:
  gpus: {vars: {env: {NCCL_DEBUG: WARN, CUDA_VISIBLE_DEVICES: "0,1"}}, hosts: [gpu-1, gpu-2]}
hosts:
  gpu-1: {address: 10.0.0.1, vars: {env: {CUDA_VISIBLE_DEVICES: "1,0"}}}
  gpu-2: {address: 10.0.0.2}
"""


def test_a_group_variable_the_hosts_own_vars_env_drops_is_said(tmp_path):
    """The newcomer's group `vars: {env: {NCCL_DEBUG: WARN}}` on the sandbox's hosts (each has a vars.env of its
    own): the dry run and the deploy both said `nothing to do` and the variable was never set, unsaid. The host's
    vars.env replaces its groups' whole (docs/playbooks.md, as Ansible's default hash_behaviour): said now."""
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "hosts.yaml").write_text(INVENTORY)
    (tmp_path / "b.yaml").write_text(BOOK)
    hosts = inventory.load(tmp_path / "inv" / "hosts.yaml").hosts
    book = playbook.load(tmp_path / "b.yaml")
    said = {name: Serving.of(hosts[name], book, tmp_path / "b.yaml").env_overrides(book.ladder)[-1:]
            for name in ("gpu-1", "gpu-2")}
    tail = "of the inventory's vars.env is not set on {}: a later level's vars.env (its group's, its own) replaces " \
           "it whole (docs/playbooks.md#environment-who-wins)"
    assert hosts["gpu-1"].env_replaced == ("NCCL_IB_DISABLE (defaults)", "NCCL_DEBUG (group gpus)")
    assert said["gpu-1"] == [f"env NCCL_DEBUG (group gpus) {tail.format('gpu-1')}"]
    assert hosts["gpu-2"].env_replaced == ("NCCL_IB_DISABLE (defaults)",)
    assert said["gpu-2"] == [f"env NCCL_IB_DISABLE (defaults) {tail.format('gpu-2')}"]
