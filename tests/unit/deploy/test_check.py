"""fleet.deploy.check: what `inv check` (and deploy, before contact) finds in a playbook without a host, against
the committed flag table of the real sglang releases (playbooks/upstream/sglang-flags.yaml)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleet import site
from fleet.deploy import check, inputs
from fleet.errors import InputError

BOOK = """name: t
model: {path: /models/m}
flags: {tp-size: 8}
ladder:
  - name: first
  - name: second
    after: [HANG]
"""


def run(tmp_path: Path, text: str, **kw) -> check.Checked:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    return check.check(path, known_classes={"HANG"}, known_patches=set(), **kw)


def lines(result: check.Checked, warnings: bool = False) -> list[str]:
    """Each problem without the temporary folder."""
    return [re.sub(r"^.*/t\.yaml", "t.yaml", str(p)) for p in (result.warnings if warnings else result.errors)]


def test_every_shipped_playbook_checks_clean(monkeypatch):
    monkeypatch.setenv("SGLANG_API_KEY", "sk-test")  # the key a shipped playbook names is set (else: a warning)
    for path in sorted((site.SHIPPED / "playbooks").glob("*.yaml")):
        result = inputs.check_playbook(path)
        assert result.book is not None and result.problems == [], (path, [str(p) for p in result.problems])


def test_flag_typos_are_found_with_the_nearest_known_flag(tmp_path):
    result = run(tmp_path, BOOK.replace("{tp-size: 8}", "{tp-szie: 8}").replace(
        "  - name: first\n", "  - name: first\n    flags: {enable-flashinfer-allreduce-fuson: true}\n"))
    assert lines(result) == [
        "t.yaml:3: flags.tp-szie: --tp-szie is in no sglang release from 0.5.8.post1 to 0.5.23; did you mean "
        "--tp-size?",
        "t.yaml:6: ladder.0.flags.enable-flashinfer-allreduce-fuson: --enable-flashinfer-allreduce-fuson is in no "
        "sglang release from 0.5.8.post1 to 0.5.23; did you mean --enable-flashinfer-allreduce-fusion?",
    ]
    assert result.book is not None  # the schema holds: only the flags are wrong


def test_switches_given_values_and_valued_flags_given_true_are_errors(tmp_path):
    result = run(tmp_path, BOOK.replace("{tp-size: 8}", "{tp-size: true, trust-remote-code: 'yes'}"))
    assert lines(result) == [
        "t.yaml:3: flags.tp-size: --tp-size takes a value: true would pass it bare and sglang would stop "
        "(expected one argument)",
        "t.yaml:3: flags.trust-remote-code: --trust-remote-code is a switch: give true (or false/null to leave it "
        "out), not 'yes'",
    ]


def test_values_out_of_the_range_sglang_documents_or_enforces_are_errors_in_the_same_pass(tmp_path):
    """mem-fraction-static 1.7 and a negative base-gpu-id passed (argparse takes any float, any int); each is one
    line naming file, line and flag, beside the pass's other errors; a range that begins in a later release (grpc-port,
    0.5.11) is judged only on the releases a rung meets from it on, and values in range are clean."""
    result = run(tmp_path, BOOK.replace("{tp-size: 8}", "{tp-size: 8, mem-fraction-static: 1.7, nccl-port: 70000}")
                 .replace("  - name: first\n", "  - name: first\n    flags: {base-gpu-id: -1, schedule-policy: fcsf,"
                          " tp-szie: 2}\n    flags_by_sglang: {'>=0.5.16': {grpc-port: 0},"
                          " '<0.5.11': {grpc-port: 0}}\n"))
    assert lines(result) == [
        "t.yaml:3: flags.mem-fraction-static: --mem-fraction-static 1.7 is out of range: a fraction of the GPU memory, "
        "more than 0 and at most 1 (sglang 0.5.8.post1's help: 'The fraction of the memory used for static "
        "allocation')",
        "t.yaml:3: flags.nccl-port: --nccl-port 70000 is out of range: a TCP port, at least 0 and at most 65535 (no "
        "socket takes another: sglang stops where it binds it)",
        "t.yaml:6: ladder.0.flags.tp-szie: --tp-szie is in no sglang release from 0.5.8.post1 to 0.5.23; did you mean "
        "--tp-size?",
        "t.yaml:6: ladder.0.flags.base-gpu-id: --base-gpu-id -1 is out of range: a GPU index, at least 0 (sglang "
        "0.5.8.post1 stops at start: 'base_gpu_id must be non-negative', sglang/srt/server_args.py)",
        "t.yaml:6: ladder.0.flags.schedule-policy: --schedule-policy 'fcsf' is not one of sglang 0.5.8.post1's choices "
        "(lpm, random, fcfs, dfs-weight, lof, priority, routing-key); did you mean fcfs? (sglang 0.5.8.post1)",
        "t.yaml:7: ladder.0.flags_by_sglang.<0.5.11.grpc-port: --grpc-port needs sglang >= 0.5.16 (sglang 0.5.8.post1)",
        "t.yaml:7: ladder.0.flags_by_sglang.>=0.5.16.grpc-port: --grpc-port 0 is out of range: a TCP port, at least 1 "
        "and at most 65535 (sglang 0.5.16 stops at start: 'must be between 1 and 65535', sglang/srt/server_args.py)",
    ]  # grpc-port under <0.5.11: said by the flag's own check (no release it exists on is one the range holds on)
    clean = run(tmp_path, BOOK.replace("{tp-size: 8}", "{tp-size: 8, mem-fraction-static: 1, base-gpu-id: 0, "
                                                       "nccl-port: 65535, gpu-id-step: 1}"))
    assert lines(clean) == []


def test_a_flag_removed_in_a_release_the_playbook_can_meet_is_an_error_and_a_deprecated_one_a_warning(tmp_path):
    result = run(tmp_path, BOOK.replace("{tp-size: 8}", "{tp-size: 8, cuda-graph-max-bs: 256, "
                                                          "disable-cuda-graph: true}"))
    assert lines(result) == ["t.yaml:3: flags.cuda-graph-max-bs: --cuda-graph-max-bs was removed in sglang 0.5.20 "
                             "(deprecated since 0.5.14); use --cuda-graph-max-bs-decode (sglang 0.5.20, rung first)"]
    assert lines(result, warnings=True) == [
        "t.yaml:3: flags.cuda-graph-max-bs: --cuda-graph-max-bs is deprecated since sglang 0.5.14; use "
        "--cuda-graph-max-bs-decode (sglang 0.5.14, rung first)",
        "t.yaml:3: flags.disable-cuda-graph: --disable-cuda-graph is deprecated since sglang 0.5.14; use "
        "--cuda-graph-backend-{decode,prefill}=disabled (sglang 0.5.14, rung first)"]


def test_a_rung_limited_to_old_releases_or_overriding_by_version_is_clean(tmp_path):
    text = BOOK.replace("  - name: first\n", "  - name: first\n    when: {sglang: '<0.5.14'}\n"
                                             "    flags: {cuda-graph-max-bs: 256}\n"
                                             "  - name: both\n    flags: {cuda-graph-max-bs: 256}\n"
                                             "    flags_by_sglang:\n"
                                             "      '>=0.5.14': {cuda-graph-max-bs: null,\n"
                                             "                   cuda-graph-max-bs-decode: 256}\n")
    assert run(tmp_path, text).problems == []


@pytest.mark.parametrize("change,expected", [
    (('"<0.5.14": {cuda-graph-max-bs: 256}', '"<0.5.21": {cuda-graph-max-bs: 256}'),
     r"t.yaml:9: ladder.1.flags_by_sglang.<0.5.21.cuda-graph-max-bs: --cuda-graph-max-bs was removed in sglang "
     r"0.5.20 \(deprecated since 0.5.14\); use --cuda-graph-max-bs-decode \(sglang 0.5.20\)"),
    (('">=0.5.14": {cuda-graph-max-bs-decode: 256}', '">=0.5.9": {cuda-graph-max-bs-decode: 256}'),
     r"t.yaml:10: .*--cuda-graph-max-bs-decode needs sglang >= 0.5.14 \(sglang 0.5.9\)"),
])
def test_flags_by_sglang_are_checked_against_every_known_release_in_their_range(tmp_path, change, expected):
    text = BOOK.replace("    after: [HANG]\n", "    after: [HANG]\n    flags_by_sglang:\n"
                                              '      "<0.5.14": {cuda-graph-max-bs: 256}\n'
                                              '      ">=0.5.14": {cuda-graph-max-bs-decode: 256}\n')
    assert run(tmp_path, text).problems == []
    assert re.fullmatch(expected, lines(run(tmp_path, text.replace(*change)))[0])


def test_the_sites_own_sglang_releases_are_checked_too(tmp_path):
    # a rung for a release newer than the table: checked against none, unless this site's hosts reported one
    text = BOOK.replace("  - name: first\n", "  - name: first\n    when: {sglang: '>=0.5.24'}\n"
                                             "    flags: {cuda-graph-max-bs: 256}\n")
    alone = run(tmp_path, text)
    assert lines(alone) == [] and lines(alone, warnings=True) == [
        "t.yaml:6: ladder.0.when.sglang: no sglang release fleet knows is in '>=0.5.24' (its flags are checked "
        "against none)"]
    site = run(tmp_path, text, site_versions=["0.5.24"])
    assert "0.5.24" in site.releases and lines(site, warnings=True) == []
    assert lines(site) == ["t.yaml:7: ladder.0.flags.cuda-graph-max-bs: --cuda-graph-max-bs was removed in sglang "
                           "0.5.20 (deprecated since 0.5.14); use --cuda-graph-max-bs-decode (sglang 0.5.24)"]


@pytest.mark.parametrize("when,expected", [
    ("{interconnect: [NVLink]}", r"t.yaml:6: ladder.0.when.interconnect: 'NVLink' is no interconnect a host reports "
                                 r"\(one of nvlink, pcie, none, unknown\); did you mean nvlink\?"),
    ("{arch_family: [hopper-datacenter]}", r"t.yaml:6: ladder.0.when.arch_family: 'hopper-datacenter' is no arch "
                                           r"family .*; did you mean hopper\?"),
    ("{p2p: [OK]}", r"t.yaml:6: ladder.0.when.p2p: 'OK' is no P2P state a host reports .*"),
    ("{sm: [12]}", r"t.yaml:6: ladder.0.when.sm: SM 12 is no GPU fleet knows \(major x 10 \+ minor: 120 .*"),
    ("{sm: [120], arch_family: [hopper]}", r"t.yaml:6: ladder.0.when: never runs: SM \[120\] is "
                                           r"\['blackwell-consumer'\], not \['hopper'\]"),
    ("{min_gpus: 8, interconnect: [none]}", r"t.yaml:6: ladder.0.when: never runs: interconnect none is a one-GPU "
                                            r"host, min_gpus is 8"),
    ("{colour: blue}", r"t.yaml:6: ladder.0.when.colour: unknown key"),
])
def test_when_values_come_from_the_facts_vocabulary(tmp_path, when, expected):
    result = run(tmp_path, BOOK.replace("  - name: first\n", f"  - name: first\n    when: {when}\n"))
    assert len(lines(result)) == 1 and re.fullmatch(expected, lines(result)[0]), lines(result)


def test_the_vocabulary_holds_every_value_a_host_reports():
    from fleet.host import facts

    assert {facts.arch_family(f"{sm // 10}.{sm % 10}") for sm in facts.KNOWN_SMS} <= set(facts.ARCH_FAMILIES)
    assert facts.p2p_status([["X", "OK"], ["CNS", "X"]], 2).split()[0] in facts.P2P_STATES
    assert facts.interconnect([["X", "NV4"], ["NV4", "X"]])[0] in facts.INTERCONNECTS


def test_a_rung_after_nothing_never_runs(tmp_path):
    assert lines(run(tmp_path, BOOK.replace("after: [HANG]", "after: []"))) == [
        "t.yaml:7: ladder.1.after: rung second never runs: after: [] names no failure class"]


def test_every_problem_is_found_in_one_pass(tmp_path):
    result = run(tmp_path, BOOK.replace("{tp-size: 8}", "{tp-szie: 8, host: 0.0.0.0}").replace(
        "name: t", "name: t\nhealth: {expect: ' '}"))
    assert lines(result) == ["t.yaml:2: health: expect: blank, it would match any answer (the answer is compared "
                             "stripped)",
                             "t.yaml:4: flags: --host is set by fleet from serve.host: set it there (a host beyond "
                             "loopback needs serve.api_key)",
                             "t.yaml:4: flags.tp-szie: --tp-szie is in no sglang release from 0.5.8.post1 to 0.5.23; "
                             "did you mean --tp-size?"]


def test_every_problem_of_every_kind_is_found_in_one_pass(tmp_path, corpus_of):
    """Issue 46 finding 7: a schema error hid the pins' problems, and the first unknown patch set or class hid the
    rest (fixing four revealed two more). Now schema, flags, pins, and what the schema cannot see, all at once."""
    book = BOOK.replace("  - name: first\n", "  - name: first\n    patches: [no-such-set]\n").replace(
        "after: [HANG]", "after: [NO_SUCH_CLASS]\n    patches: [another-unknown]")
    found = lines(run(tmp_path, book))
    assert [line.split(": ", 2)[1] for line in found] == ["ladder.0.patches", "ladder.1.after", "ladder.1.patches"]
    refused = lines(run(tmp_path, book.replace("name: t", "name: t\ncolour: red")
                        + "packages:\n  sglang: 0.5.23\n  flashinfer_python: 0.7.4\n"))
    assert [line.split(": ", 2)[1] for line in refused] == ["colour", "ladder.0.patches", "ladder.1.after",
                                                            "ladder.1.patches", "packages.flashinfer_python"], refused


def test_a_schema_error_hides_no_rule_of_the_sections_that_hold_up(tmp_path):
    """Issue 46 finding 7, the newcomer's second hour: fixing one problem revealed the next, three rounds: a literal
    secret hid a bad variable name of the same env, a bad env hid the exposure rule of its serve section, and
    any schema error hid the router's rules (its host not in the inventory, its port the server's)."""
    book = BOOK.replace("name: t", "name: t\nserve:\n  host: 0.0.0.0\n  env: {HF_TOKEN: hf_abcdefghijklmnopqrstuvw"
                        "xyz0123, bad name: x}\nrouter: {host: nosuchhost, port: 30000}")
    found = lines(run(tmp_path, book, hosts={"sbx0"}))
    assert [line.split(": ", 2)[1] for line in found] == ["serve", "serve.env", "router.host", "router.port"], found
    assert "'bad name' is not valid" in found[1] and "HF_TOKEN: a literal secret" in found[1]
    assert "listens beyond loopback" in found[0]

    # a rule is not guessed where a key it reads was refused; the rules of the keys that held up still run (a
    # refused router.port hid router.host: h-check7's property test, tests/unit/cli/test_check_no_hiding.py)
    refused = lines(run(tmp_path, book.replace("port: 30000}", "port: 99999}"), hosts={"sbx0"}))
    assert [line.split(": ", 2)[1] for line in refused] == ["serve", "serve.env", "router.port", "router.host"], \
        refused
    # the exposure rule said by the schema, another section refused: the router's rules still run
    clean_env = re.sub(r"env: \{.*\}", "env: {X: y}", book)
    alone = lines(run(tmp_path, clean_env.replace("name: t", "name: t\ncolour: red"), hosts={"sbx0"}))
    assert [line.split(": ", 2)[1] for line in alone] == ["colour", "serve", "router.host", "router.port"], alone


def test_a_key_of_serve_the_schema_refuses_hides_no_exposure_rule(tmp_path):
    """Issue 46 finding 7, back (a newcomer's hour): `port: thirty` beside `host: 0.0.0.0` said only the port; the
    missing api_key came in the next round."""
    book = BOOK.replace("name: t", "name: t\nserve: {host: 0.0.0.0, port: thirty, colour: blue}")
    found = lines(run(tmp_path, book))
    assert [line.split(": ", 2)[1] for line in found] == ["serve.port", "serve.colour", "serve"], found
    assert "listens beyond loopback" in found[2]


def test_a_rung_the_schema_refuses_hides_neither_its_when_nor_the_base_flags(tmp_path):
    """Issue 46 finding 7 again (the fifth newcomer's hour): one rung whose flags the schema refuses (a secret flag,
    one fleet sets) was skipped whole, so its `when:` and the base flags it merges were checked only in the next
    round: fixing four problems revealed two more. What holds up of that rung is checked in the same pass."""
    book = """name: t
model: {path: /models/m}
flags: {tp-sze: 8}
ladder:
  - name: only
    when: {sm: [999]}
    flags: {api-key: sk-123, enable-flashinfer-allreduce-fuson: true}
"""
    found = lines(run(tmp_path, book))
    assert [line.split(": ", 2)[1] for line in found] == [
        "flags.tp-sze", "ladder.0.when.sm", "ladder.0.flags", "ladder.0.flags.enable-flashinfer-allreduce-fuson"], found
    assert "--api-key is set by fleet from serve.api_key" in found[2]
    assert "did you mean --tp-size?" in found[0] and "SM 999 is no GPU fleet knows" in found[1]


def test_a_rung_name_given_twice_is_said_beside_the_schemas_other_errors(tmp_path):
    """Issue 46 finding 7 (the sixth newcomer's hour): the ladder's duplicate-name rule ran only once every rung
    held up, so a rung the schema refused (an unknown failure class, a `when:` not a list) hid the duplicate name
    until the next round."""
    book = BOOK.replace("  - name: second\n", "  - name: first\n    when: {sm: 120}\n  - name: second\n")
    found = lines(run(tmp_path, book))
    assert [line.split(": ", 2)[1] for line in found] == ["ladder", "ladder.1.when.sm"], found
    assert "rung 'first' appears twice in the ladder" in found[0]
    # a ladder that holds up says it once, as the schema does
    twice = lines(run(tmp_path, BOOK.replace("name: second", "name: first")))
    assert [line.split(": ", 2)[1] for line in twice] == ["ladder"], twice


def test_a_tp_size_that_is_no_whole_number_is_an_error(tmp_path):
    """The sixth newcomer's hour: `flags: {tp-size: banana}` checked clean; preflight counts such a value as 1 GPU,
    and sglang stops on it at start (its --tp-size is `type=int` in every release, server_args.py)."""
    found = lines(run(tmp_path, BOOK.replace("{tp-size: 8}", "{tp-size: banana}").replace(
        "after: [HANG]", "after: [HANG]\n    flags: {tensor-parallel-size: 0}")))
    assert [line.split(": ", 2)[1] for line in found] == ["flags.tp-size", "ladder.1.flags.tensor-parallel-size"]
    assert "--tp-size takes a whole number of GPUs, 1 or more, not 'banana'" in found[0]
    assert lines(run(tmp_path, BOOK)) == []


def test_deploy_refuses_in_one_line_with_the_count_of_the_rest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLEET_SITE", str(tmp_path))  # the site's own playbooks/ come first
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "t.yaml").write_text(BOOK.replace("{tp-size: 8}", "{tp-szie: 8, trust-remote-code: 1}"))
    with pytest.raises(InputError) as err:
        inputs.load_playbook("t")
    assert str(err.value) == (f"{tmp_path}/playbooks/t.yaml:3: flags.tp-szie: --tp-szie is in no sglang "
                              "release from 0.5.8.post1 to 0.5.23; did you mean --tp-size? "
                              "(and 1 more: inv check --playbook t)")
    assert inputs.load_playbook("t", checked=False)[0].name == "t"  # rollback reads what was deployed


def test_a_refused_playbook_prints_no_raw_text_of_its_own(tmp_path):
    result = run(tmp_path, BOOK.replace("{tp-size: 8}", '{"tp-size\\e[2J": 8, tp-szie: 8}'))
    assert all("\x1b" not in str(p) for p in result.problems) and len(result.errors) == 2
    assert "did you mean --tp-size?" in str(result.errors[1])


@pytest.fixture
def corpus_of(tmp_path, monkeypatch):
    """An upstream cache holding the real METADATA of sglang 0.5.9 and 0.5.23 (tests/fixtures/upstream)."""
    import json

    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "upstream"
    cache = tmp_path / "cache"
    for dist, version in (("sglang", "0.5.9"), ("sglang", "0.5.23"), ("flashinfer-python", "0.7.2")):
        root = cache / dist / version
        info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text((fixtures / f"{dist}-{version}.METADATA").read_text())
        (root / "release.json").write_text(json.dumps({"dist": dist, "version": version, "root": str(root),
                                                       "wheel": "w.whl", "sha256": "0", "wheel_bytes": 0,
                                                       "files": 1, "bytes": 0}))
    monkeypatch.setenv("FLEET_UPSTREAM_CACHE", str(cache))
    monkeypatch.setenv("FLEET_WHEELHOUSE", str(tmp_path / "wheelhouse"))
    return cache


def test_pins_the_wheels_disagree_on_are_an_error_naming_the_pin_s_line(tmp_path, corpus_of):
    result = run(tmp_path, BOOK + "packages:\n  sglang: 0.5.23\n  flashinfer_python: 0.7.4\n")
    assert lines(result) == ["t.yaml:10: packages.flashinfer_python: sglang 0.5.23 requires "
                             "flashinfer-python==0.7.2; the playbook pins 0.7.4"]
    assert result.releases == ["0.5.23"]  # a pinned sglang is the one release the flags must hold on
    result = run(tmp_path, BOOK + "packages: {sglang: 0.5.23, flashinfer-python: 0.7.2}\n")
    assert result.errors == []
    # a deploy would download these, or refuse them where it may not (fleet.deploy.inputs): the wheelhouse is empty
    assert [str(p).split(": ", 2)[1:] for p in result.warnings] == [
        [f"packages.{d}", f"no wheel of {d} {v} in the wheelhouse {tmp_path / 'wheelhouse'} (fleet installs only "
                          f"from it: pip download --no-deps {d}=={v} -d {tmp_path / 'wheelhouse'}, or "
                          "FLEET_WHEELHOUSE=a folder with it)"]
        for d, v in (("sglang", "0.5.23"), ("flashinfer-python", "0.7.2"))]


def test_a_pin_that_is_not_one_version_or_not_in_the_corpus_is_one_line(tmp_path, corpus_of):
    assert lines(run(tmp_path, BOOK + "packages:\n  sglang: 0.6\n")) == [
        "t.yaml:9: packages.sglang: 0.6 is a number in YAML: quote the version ('0.6')"]
    assert lines(run(tmp_path, BOOK + "packages:\n  sglang: '>=0.5.9'\n")) == [
        "t.yaml:9: packages.sglang: '>=0.5.9' is not one exact version (write e.g. 0.5.23 or "
        "0.6.16.post4, no '==', range or '*')"]
    assert lines(run(tmp_path, BOOK + "packages:\n  sglang: 0.5.99\n")) == [
        f"t.yaml:9: packages.sglang: sglang 0.5.99 is not in the upstream cache {corpus_of}, so its Requires-Dist "
        "cannot be checked: fetch it with `inv upstream --sglang 0.5.99`"]


def test_a_flag_the_pinned_sglang_removed_is_an_error_for_that_release(tmp_path, corpus_of):
    book = BOOK.replace("{tp-size: 8}", "{tp-size: 8, cuda-graph-max-bs: 256}")
    assert run(tmp_path, book + "packages: {sglang: 0.5.9}\n").errors == []
    assert any("--cuda-graph-max-bs was removed in sglang" in p and "(sglang 0.5.23, rung first)" in p
               for p in lines(run(tmp_path, book + "packages: {sglang: 0.5.23, flashinfer-python: 0.7.2}\n")))


def test_a_value_sglang_would_refuse_at_start_is_an_error_with_the_nearest_choice(tmp_path):
    book = BOOK.replace("{tp-size: 8}", "{tp-size: 8, attention-backend: flashinfr}")
    said = lines(run(tmp_path, book + "packages: {sglang: 0.5.9}\n"))
    assert len(said) == 1 and said[0].startswith("t.yaml:3: flags.attention-backend: --attention-backend "
                                                 "'flashinfr' is not one of sglang 0.5.9's choices (")
    assert said[0].endswith("did you mean flashinfer? (sglang 0.5.9, rung first)")
    good = BOOK.replace("{tp-size: 8}", "{tp-size: 8, attention-backend: flashinfer, moe-runner-backend: "
                                        "flashinfer_cutlass}")
    assert run(tmp_path, good).errors == []


def test_a_value_of_the_wrong_type_is_an_error_naming_the_flags_type(tmp_path):
    book = BOOK.replace("{tp-size: 8}", "{tp-size: 8, max-running-requests: many, mem-fraction-static: 0.85}")
    said = lines(run(tmp_path, book))
    assert said == ["t.yaml:3: flags.max-running-requests: --max-running-requests takes a whole number (sglang's "
                    "type=int), not 'many' (sglang 0.5.8.post1, rung first)"], said


def test_a_pin_the_probe_cannot_read_in_a_venv_is_a_warning(tmp_path, corpus_of):
    result = run(tmp_path, BOOK + "packages: {sglang: 0.5.9, triton: 3.5.0}\n")
    assert result.errors == []
    said = [w for w in lines(result, warnings=True) if "wheelhouse" not in w]  # the empty wheelhouse's, as above
    assert [w.split(": the probe")[0] for w in said] == ["t.yaml:8: packages.triton"]


def test_a_lock_that_no_longer_locks_the_pins_is_a_warning_naming_it(tmp_path, corpus_of):
    from fleet.upstream import lockfile
    from fleet.upstream.wheelhouse import Target

    lock = tmp_path / "t.lock"
    lockfile.dump(lock, [lockfile.Entry(lockfile.key({"sglang": "0.5.9"}), Target("3.11"), ())])
    stale = [p for p in lines(run(tmp_path, BOOK + "packages: {sglang: 0.5.23}\n"), warnings=True) if ".lock" in p]
    assert stale == [f"t.yaml:8: packages: {lock} locks other pins than packages: (the first deploy of these locks "
                     "them; on purpose now: inv check --lock --playbook t)"]
    assert not [p for p in lines(run(tmp_path, BOOK + "packages: {sglang: 0.5.9}\n"), warnings=True) if ".lock" in p]


def test_every_problem_of_a_multi_node_playbook_in_one_pass(tmp_path):
    """Issue 46, finding 7 (h-check7): the nodes rules stopped at the first (dist_port, then a node flag fleet
    sets, then a rung's TP x PP), so a multi-node playbook with three took three runs."""
    book = BOOK.replace("name: t", "name: t\nnodes: {count: 2, dist_port: 30000}").replace(
        "{tp-size: 8}", "{tp-size: 3, nnodes: 2, node-rank: 0}")
    found = lines(run(tmp_path, book))
    assert [line.split(": ", 2)[1] for line in found] == ["nodes.dist_port", "flags.nnodes", "flags.node-rank",
                                                          "ladder.0", "ladder.1"], found
