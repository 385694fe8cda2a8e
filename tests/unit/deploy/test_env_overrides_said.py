"""The inventory's vars.env over the playbook's env is said, not only shown as a diff line (issue 46, finding 8:
'silently overrides'; the fifth newcomer's dry run and deploy showed the env file's diff and never said that the
value came from the inventory over the playbook's serve.env). Deployer.plan says these lines in both."""

from __future__ import annotations

from pathlib import Path

from fleet import playbook
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
