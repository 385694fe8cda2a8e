"""A load point of `inv tune --slo` says where it stands while its requests run (issue 46, finding 5; the eighteenth
newcomer's hour): a point is requests/rate seconds (the default 1000 at 2 req/s: 500 s), and from `load point: 2
req/s, 1000 requests` to its verdict a log got no line, where every long step says where it stands."""

from __future__ import annotations

from pathlib import Path

from ticking import Said

from fleet.cli.tune import slo_settings
from fleet.deploy.bench import BenchError
from fleet.inventory import Host
from fleet.multihost import slotune
from fleet.playbook import load

HOST = Host(name="h", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(), source=Path("hosts.yaml"))


def test_a_load_point_says_where_it_stands_while_it_runs(tmp_path, monkeypatch):
    (tmp_path / "p.yaml").write_text("name: p\nmodel: {path: /m}\nladder: [{name: base}]\n")
    settings = slo_settings("ttft_p99=2s", None, None)
    assert settings is not None
    said = Said()
    tuner = slotune.SloTuner.with_settings(settings)(HOST, load(tmp_path / "p.yaml"), tmp_path / "p.yaml", None,
                                                      said, {}, lambda _: True)  # type: ignore[arg-type]

    def measure(*args, **kwargs):
        assert said.ticked.wait(10), said  # where the point stands was said while it ran
        raise BenchError("the server went away")

    monkeypatch.setattr(slotune.loadprobe, "measure", measure)
    verdict = tuner.point(None, 2.0, 1000)  # type: ignore[arg-type]
    assert not verdict.passed
    live = [str(m) for m in said if type(m).__name__ == "Live"]
    assert live and live[0].startswith("phase load point 2 req/s: "), said
