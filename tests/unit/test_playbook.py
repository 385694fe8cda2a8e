"""Playbook loading and validation: clear one-line errors; rung conditions against probe facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet import playbook
from fleet.errors import InputError
from fleet.host.facts import Gpu, HostFacts, Package

MINIMAL = """name: t
model: {path: /models/m}
flags: {tp-size: 8, enable-metrics: true}
ladder:
  - name: fusion
    when: {sm: [120]}
    flags: {enable-flashinfer-allreduce-fusion: true}
    patches: [sm120-allreduce-fusion]
  - name: plain
    after: [ARCH_UNSUPPORTED]
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.yaml"
    p.write_text(text)
    return p


def test_a_minimal_playbook_loads_with_defaults(tmp_path):
    book = playbook.load(write(tmp_path, MINIMAL), known_classes={"ARCH_UNSUPPORTED"},
                         known_patches={"sm120-allreduce-fusion"})
    assert [r.name for r in book.ladder] == ["fusion", "plain"]
    assert book.serve.host == "127.0.0.1" and book.health.expect == "4"


def test_a_playbook_with_no_ladder_has_its_base_flags_as_the_one_rung(tmp_path):
    book = playbook.load(write(tmp_path, "name: t\nmodel: {path: /models/m}\nflags: {tp-size: 8}\n"))
    assert [(r.name, r.flags) for r in book.ladder] == [("base", {})]
    assert playbook.merged_flags(book.flags, book.ladder[0])["tp-size"] == 8
    with pytest.raises(InputError, match=r"t.yaml:3: ladder: .*at least 1"):  # an empty one is still an error
        playbook.load(write(tmp_path, "name: t\nmodel: {path: /models/m}\nladder: []\n"))


@pytest.mark.parametrize("change,expected", [
    (("tp-size: 8", "tp-size: 8, '--tp': 1"), r"t.yaml:3: flags: .*without leading dashes"),
    (("after: [ARCH_UNSUPPORTED]", "after: [NOPE]"), r"t.yaml:10: ladder.1.after: unknown failure class 'NOPE'"),
    (("patches: [sm120-allreduce-fusion]", "patches: [nope]"), r"t.yaml:8: ladder.0.patches: unknown patch set"),
    (("model: {path: /models/m}", "model: {}"), r"t.yaml:2: model.path: required key is missing"),
    (("  - name: plain", "  - name: fusion"), r"t.yaml:4: ladder: .*rung 'fusion' appears twice"),
    (("name: t", "name: t\ncolour: red"), r"t.yaml:2: colour: unknown key"),
    (("when: {sm: [120]}", "when: {sm: [120], gpu: x}"), r"t.yaml:6: ladder.0.when.gpu: unknown key"),
    (("name: t", "name: t\ndescripton: x"), r"t.yaml:2: descripton: unknown key; did you mean description\?$"),
    (("when: {sm: [120]}", "when: {sm: [120], min_gpu: 2}"),
     r"t.yaml:6: ladder.0.when.min_gpu: unknown key; did you mean min_gpus\?$"),
    # a budget is seconds of a phase: -5 or 0 made every phase a HANG at once, and budgets.stop is the unit's
    # TimeoutStopSec (newcomer's hour: `inv check` passed `budgets: {start: -5}`)
    (("name: t", "name: t\nbudgets: {start: -5}"), r"t.yaml:2: budgets.start: .*greater than 0"),
    (("name: t", "name: t\nbudgets: {stop: 0}"), r"t.yaml:2: budgets.stop: .*greater than 0"),
    (("name: t", "name: t\nbudgets: {ready: .nan}"), r"t.yaml:2: budgets.ready: .*finite number"),
])
def test_bad_playbooks_fail_with_file_line_and_key(tmp_path, change, expected):
    with pytest.raises(InputError, match=expected) as err:
        playbook.load(write(tmp_path, MINIMAL.replace(*change)), known_classes={"ARCH_UNSUPPORTED"},
                      known_patches={"sm120-allreduce-fusion"})
    assert "\n" not in str(err.value)


def test_injection_in_flag_or_env_values_is_refused(tmp_path):
    text = MINIMAL.replace("tp-size: 8", 'tp-size: "8\\nExecStartPre=/bin/sh"')
    with pytest.raises(InputError, match=r"t.yaml:3: flags: .*newlines"):
        playbook.load(write(tmp_path, text))


def test_a_number_or_boolean_in_env_is_text_as_the_inventory_takes_it(tmp_path):
    """`OMP_NUM_THREADS: 8` in serve.env or a rung's env was refused with pydantic's own words ('...str: Input
    should be a valid string'); vars.env took it. Both take it now, as Python spells it."""
    text = MINIMAL.replace("model: {path: /models/m}", "model: {path: /models/m}\nserve: {env: {OMP_NUM_THREADS: 8, "
                           "NCCL_P2P_DISABLE: true, X: 0.5}}").replace("  - name: plain", "  - name: plain\n    env: "
                                                                        "{NCCL_IB_DISABLE: 1}")
    book = playbook.load(write(tmp_path, text), known_classes={"ARCH_UNSUPPORTED"},
                         known_patches={"sm120-allreduce-fusion"})
    assert book.serve.env == {"OMP_NUM_THREADS": "8", "NCCL_P2P_DISABLE": "True", "X": "0.5"}
    assert book.ladder[1].env == {"NCCL_IB_DISABLE": "1"}


def test_merged_flags_add_override_and_drop():
    rung = playbook.Rung(name="r", flags={"tp-size": 4, "pp-size": 2, "enable-metrics": None})
    assert playbook.merged_flags({"tp-size": 8, "enable-metrics": True}, rung) == {"tp-size": 4, "pp-size": 2}
    assert playbook.flag_args({"tp-size": 4, "enable-metrics": True}) == ["--tp-size", "4", "--enable-metrics"]


def test_metrics_are_on_by_default_and_a_playbook_or_rung_can_turn_them_off():
    plain = playbook.Rung(name="r")
    assert playbook.merged_flags({"tp-size": 8}, plain) == {"tp-size": 8, "enable-metrics": True}
    assert playbook.merged_flags({"enable-metrics": False}, plain) == {}
    assert playbook.merged_flags({}, playbook.Rung(name="quiet", flags={"enable-metrics": False})) == {}


def facts(sm: int, n: int = 8, p2p: str = "refused (CNS)", family: str = "blackwell-consumer") -> HostFacts:
    gpus = [Gpu(index=i, name="g", uuid=None, compute_cap=f"{sm // 10}.{sm % 10}", sm=sm) for i in range(n)]
    return HostFacts(host="h", address="a", gpus=gpus, p2p=p2p, arch_family=family, interconnect="pcie")


def test_conditions_explain_why_a_rung_does_not_fit():
    c = playbook.Conditions(sm=[120, 121], p2p=["refused"], min_gpus=8)
    assert c.failed(facts(120)) is None
    assert "needs SM in [120, 121]" in c.failed(facts(90, family="hopper"))
    assert "needs P2P ['refused']" in c.failed(facts(120, p2p="ok"))
    assert "at least 8 GPUs" in c.failed(facts(120, n=2))


def test_listening_beyond_loopback_needs_an_api_key_reference(tmp_path):
    exposed = MINIMAL.replace("model: {path: /models/m}", "model: {path: /models/m}\nserve: {host: 0.0.0.0}")
    with pytest.raises(InputError, match=r"t.yaml:3: serve: host 0.0.0.0 listens beyond loopback"):
        playbook.load(write(tmp_path, exposed))
    keyed = exposed.replace("serve: {host: 0.0.0.0}", "serve: {host: 0.0.0.0, api_key: {env: SGL_KEY}}")
    assert playbook.load(write(tmp_path, keyed)).serve.api_key.env == "SGL_KEY"
    both = keyed.replace("{env: SGL_KEY}", "{env: SGL_KEY, file: /k}")
    with pytest.raises(InputError, match=r"serve.api_key: .*exactly one of env or file"):
        playbook.load(write(tmp_path, both))



VERSIONED = MINIMAL.replace("""  - name: plain
    after: [ARCH_UNSUPPORTED]
""", """  - name: plain
    after: [ARCH_UNSUPPORTED]
    flags: {mem-fraction-static: 0.8}
    flags_by_sglang:
      "<0.5.14": {cuda-graph-max-bs: 256}
      ">=0.5.14": {cuda-graph-max-bs-decode: 256}
""")


def test_flags_by_sglang_merge_the_entries_whose_range_holds_the_host_version(tmp_path):
    book = playbook.load(write(tmp_path, VERSIONED))
    plain = book.ladder[1]
    assert playbook.merged_flags({}, plain, "0.5.9") == {"enable-metrics": True, "mem-fraction-static": 0.8,
                                                         "cuda-graph-max-bs": 256}
    assert playbook.merged_flags({}, plain, "0.5.23")["cuda-graph-max-bs-decode"] == 256
    assert "cuda-graph-max-bs" not in playbook.merged_flags({}, plain, "0.5.23")
    unknown = playbook.merged_flags({}, plain, None)  # no version known: only the unconditional flags
    assert "cuda-graph-max-bs" not in unknown and "cuda-graph-max-bs-decode" not in unknown


def test_a_bad_flags_by_sglang_range_is_refused_on_load(tmp_path):  # its flags: tests/unit/deploy/test_check.py
    with pytest.raises(InputError, match=r"t.yaml:12: ladder.1.flags_by_sglang: .*bad version range clause"):
        playbook.load(write(tmp_path, VERSIONED.replace('"<0.5.14"', '"before 0.5.14"')))


def test_a_rung_can_require_an_sglang_range():
    c = playbook.Conditions(sglang=">=0.5.20")
    new, old = facts(120), facts(120)
    new.packages["sglang"] = Package(version="0.5.23")
    old.packages["sglang"] = Package(version="0.5.9")
    assert c.failed(new) is None
    assert c.failed(old) == "needs sglang >=0.5.20, host has 0.5.9"
    assert c.failed(facts(120)) == "needs sglang >=0.5.20, host has none found"


@pytest.mark.parametrize("change,expected", [
    # sglang users write the listen address as a flag: argparse keeps the last --host, so it would win over
    # serve.host and open the server with no key
    (("tp-size: 8,", "tp-size: 8, host: 0.0.0.0,"), r"t.yaml:3: flags: --host is set by fleet from serve.host"),
    (("tp-size: 8,", "tp-size: 8, port: 8000,"), r"t.yaml:3: flags: --port is set by fleet from serve.port"),
    (("tp-size: 8,", "tp-size: 8, model: /m,"), r"--model is set by fleet from model.path"),
    (("{enable-flashinfer-allreduce-fusion: true}", "{api-key: sk-123}"),
     r"t.yaml:7: ladder.0.flags: --api-key is set by fleet from serve.api_key"),
    (("tp-size: 8,", "tp-size: 8, admin-api-key: sk-1,"),
     r"t.yaml:3: flags: --admin-api-key would put a secret in the unit file .*\{env: NAME\}"),
    (("model: {path: /models/m}", "model: {path: /models/m}\nserve: {env: {HF_TOKEN: hf_abc}}"),
     r"t.yaml:3: serve.env: HF_TOKEN: a literal secret in a playbook; name it instead: "
     r"HF_TOKEN: \{env: HF_TOKEN\}"),
    (("    patches: [sm120", "    env: {AWS_SECRET_ACCESS_KEY: x}\n    patches: [sm120"),
     r"t.yaml:8: ladder.0.env: AWS_SECRET_ACCESS_KEY: a literal secret"),
])
def test_the_server_opens_one_way_and_no_literal_secret_loads(tmp_path, change, expected):
    with pytest.raises(InputError, match=expected):
        playbook.load(write(tmp_path, MINIMAL.replace(*change)))


def test_every_bad_flag_of_one_mapping_is_said_at_once(tmp_path):
    """Issue 46 finding 7, back (a newcomer's hour): `flags: {port: 1, model-path: x, tp_size: 2}` said --port,
    then --model-path in the next run, then tp_size in the one after."""
    book = MINIMAL.replace("tp-size: 8,", "tp-size: 8, port: 1, model-path: /m, tp_size: 2, admin-key: k,")
    with pytest.raises(InputError) as refused:
        playbook.load(write(tmp_path, book))
    said = str(refused.value)
    assert said.count("; ") == 3 and all(f in said for f in ("--port", "--model-path", "'tp_size'", "--admin-key"))
    assert "--port is set by fleet from serve.port: set it there;" in said  # no word of api_key for a port


def test_the_router_takes_no_secret_flag_either(tmp_path):
    text = MINIMAL + ("serve: {host: 0.0.0.0, api_key: {env: K}}\n"
                      "router: {host: r, flags: {health-check-interval-secs: 10, admin-api-key: sk-1}}\n")
    with pytest.raises(InputError, match=r"router.flags: --admin-api-key would put a secret in the unit file"):
        playbook.load(write(tmp_path, text))
    playbook.load(write(tmp_path, text.replace(", admin-api-key: sk-1", "")))


def test_a_name_secret_only_by_the_playbooks_own_list_is_refused_as_a_literal_too(tmp_path):
    listed = MINIMAL.replace("model: {path: /models/m}", "model: {path: /models/m}\nserve: {secret_env: [BLOB]}")
    playbook.load(write(tmp_path, listed))
    with pytest.raises(InputError, match=r"t.yaml:9: ladder.0.env: BLOB: a literal secret"):
        playbook.load(write(tmp_path, listed.replace("    patches: [sm120", "    env: {BLOB: x}\n    patches: [sm120")))


def test_env_secrets_are_references_resolved_locally_and_masked_when_shown(tmp_path, monkeypatch):
    from fleet.deploy.inputs import secrets_for

    book = playbook.load(write(tmp_path, MINIMAL.replace(
        "model: {path: /models/m}", "model: {path: /models/m}\nserve: {env: {HF_TOKEN: {env: T}, A: '1'}}").replace(
        "    patches: [sm120", "    env: {HF_TOKEN: {env: T2}, BLOB: {env: T3}}\n    patches: [sm120")))
    monkeypatch.setenv("T", "hf_live")
    monkeypatch.setenv("T2", "hf_fusion_only")
    monkeypatch.setenv("T3", "b")
    secrets = secrets_for(book)
    fusion, plain = book.ladder
    assert playbook.plain_env(book, plain, secrets) == {"HF_TOKEN": "hf_live", "A": "1"}
    env = playbook.plain_env(book, fusion, secrets)  # a rung's own reference for its own rung only
    assert env == {"HF_TOKEN": "hf_fusion_only", "A": "1", "BLOB": "b"}
    # a value from a reference is masked whatever its name
    assert playbook.shown_env(env, playbook.secret_names(book)) == {"HF_TOKEN": "<secret>", "A": "1",
                                                                    "BLOB": "<secret>"}
    with pytest.raises(InputError, match=r"HF_TOKEN: its secret \(HF_TOKEN.env: \$T\) was not resolved"):
        playbook.plain_env(book, plain, {})
    monkeypatch.delenv("T")
    with pytest.raises(InputError, match=r"serve.env.HF_TOKEN.env: \$T is not set or blank"):
        secrets_for(book)


@pytest.mark.parametrize("health,expected", [
    ("{expect: ' Paris'}", "Paris"),  # the answer is compared stripped: so is the expectation
    ("{expect: '4\n'}", "4"),
    ("{expect: '  '}", r"t.yaml:\d+: health: expect: blank, it would match any answer"),
    ("{expect: 'a b c d', max_tokens: 2}", r"health: expect: 4 words cannot come back in max_tokens 2"),
])
def test_the_health_expectation_is_normalised_as_the_answer_is(tmp_path, health, expected):
    path = write(tmp_path, MINIMAL + f"health: {health}\n")
    if expected.isalnum():
        assert playbook.load(path).health.expect == expected
    else:
        with pytest.raises(InputError, match=expected):
            playbook.load(path)


@pytest.mark.parametrize("name", ["../../../../tmp/x", "/etc/passwd", "glm5-nvfp4.yaml/..", "x\n", "", "UPPER"])
def test_a_playbook_a_host_names_is_only_a_plain_name(name):
    with pytest.raises(InputError, match="playbook name"):
        playbook.shipped(name)


def test_a_playbook_a_host_names_resolves_only_inside_the_folder(tmp_path):
    folder, outside = tmp_path / "playbooks", tmp_path / "outside.yaml"
    folder.mkdir()
    outside.write_text("name: outside\n")
    (folder / "inside.yaml").write_text("name: inside\n")
    (folder / "escape.yaml").symlink_to(outside)
    assert playbook.shipped("inside", [folder]) == (folder / "inside.yaml").resolve()
    with pytest.raises(InputError, match="no playbook escape in"):
        playbook.shipped("escape", [folder])
    with pytest.raises(InputError, match=r"no playbook missing in .*\(known: escape, inside\)"):
        playbook.shipped("missing", [folder])
