"""`inv check -i` says a `proxy_jump:` no host task can take (issue 46, 7, a newcomer's form): `proxy_jump:
root@bastion:99999` was `0 errors`, and `inv probe -H h1` then refused the host at once (`bad ProxyJump element`,
exit 2): a problem found only in a second round, by a task. Read as connect reads it (fleet.ssh.config.parse_jump),
nothing resolved or run."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from fleet.cli import check


@pytest.mark.parametrize(("jump", "bad"), [("root@bastion:99999", "root@bastion:99999"), ("a, b:x", "b:x"),
                                           ("ops@[fe80::1]:22,root@pve1", None), ("none", None)])
def test_each_jump_host_element_is_read_as_a_connection_reads_it(tmp_path: Path, jump: str, bad: str | None) -> None:
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "hosts.yaml").write_text(f"hosts:\n  h1: {{address: 10.0.0.1, proxy_jump: '{jump}'}}\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = check.command(["glm5-nvfp4"], str(tmp_path / "inv" / "hosts.yaml"), True)
    errors = json.loads(out.getvalue())["inventory_errors"]
    if bad is None:
        assert (code, errors) == (0, [])
    else:
        assert code == 2
        assert errors == [f"{tmp_path / 'inv' / 'hosts.yaml'}: hosts.h1.proxy_jump: bad ProxyJump element {bad!r}"]
