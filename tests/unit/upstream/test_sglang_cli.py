"""Reading sglang's launch_server flags from source with ast, and the per-release table (pure)."""

from __future__ import annotations

from fleet.upstream import flags as sglang_cli
from fleet.upstream.flags import Flag

CALLS = '''
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str, help="The path of the model weights.")
        parser.add_argument("--disable-cuda-graph", action="store_true", help="Disable cuda graph.")
        parser.add_argument("--old-thing", action=DeprecatedStoreTrueAction, new_flag="--new-thing", help="x")
        parser.add_argument("--enable-x", action="store_true", help="(Deprecated: use --x-backend=auto) Enable x.")
        parser.add_argument("--mode", action=argparse.BooleanOptionalAction, default=True)
        parser.add_argument("positional")
'''

FIELDS = '''
@dataclasses.dataclass
class ExecArgs:
    tp_size: A[int, Arg(help="Tensor parallel size.", aliases=["--tensor-parallel-size"])] = 1
    host: A[str, "The host of the HTTP server."] = "127.0.0.1"
    trust_remote_code: A[Optional[bool], "Trust remote code."] = None
    internal: A[bool, Arg(no_cli=True)] = False
    renamed: A[int, Arg(help="h", cli_name="--other-name")] = 0
    derived: A[int, Derived(doc="runtime")] = 0
    plain: int = 0
    fast_image: A[bool, "Deprecated. Use --image-processor-backend=pil instead."] = False
'''


def test_add_argument_calls_give_names_aliases_switches_and_deprecations():
    got = {f.name: f for f in sglang_cli.parse(CALLS)}
    assert set(got) == {"model-path", "model", "disable-cuda-graph", "old-thing", "enable-x", "mode", "no-mode"}
    assert got["model-path"] == Flag("model-path", switch=False)
    assert got["disable-cuda-graph"].switch and got["disable-cuda-graph"].deprecated is None
    assert got["old-thing"] == Flag("old-thing", switch=True, deprecated="--new-thing")
    assert got["enable-x"].deprecated == "--x-backend=auto"
    assert got["no-mode"].switch


def test_annotated_fields_follow_add_cli_args_from_dataclass():
    got = {f.name: f for f in sglang_cli.parse(FIELDS)}
    assert set(got) == {"tp-size", "tensor-parallel-size", "host", "trust-remote-code", "other-name", "fast-image"}
    assert got["trust-remote-code"].switch and not got["host"].switch
    assert got["fast-image"].deprecated == "--image-processor-backend=pil"


def test_the_table_spans_releases_and_words_removals_and_deprecations():
    releases = [
        ("0.5.9", {"a": Flag("a", False), "b": Flag("b", True)}),
        ("0.5.14", {"a": Flag("a", False, deprecated="--a-decode"), "a-decode": Flag("a-decode", False),
                    "b": Flag("b", True)}),
        ("0.5.20", {"a-decode": Flag("a-decode", False)}),
        ("0.5.22", {"a-decode": Flag("a-decode", False), "b": Flag("b", True)}),  # b came back
    ]
    t = sglang_cli.build(reversed(releases))
    assert t.versions == ["0.5.9", "0.5.14", "0.5.20", "0.5.22"]
    assert t.flags["b"].spans == [["0.5.9", "0.5.14"], ["0.5.22", "0.5.22"]]
    assert t.problem("a", "0.5.21") == "--a was removed in sglang 0.5.20 (deprecated since 0.5.14); use --a-decode"
    assert t.problem("b", "0.5.20") == "--b was removed in sglang 0.5.20"
    assert t.problem("b", "0.5.22.post1") is None
    assert t.problem("a-decode", "0.5.9") == "--a-decode needs sglang >= 0.5.14 (host has 0.5.9)"
    assert t.problem("a", "0.5.8") is None  # older than every known release: the table cannot say
    assert t.deprecated("a", "0.5.15") == "--a is deprecated since sglang 0.5.14; use --a-decode"
    assert t.deprecated("a", "0.5.9") is None
    assert sglang_cli.Table.model_validate(__import__("yaml").safe_load(sglang_cli.dump(t))) == t


CHOICES = '''
LOAD_FORMAT_CHOICES = ["auto", "pt"]
ATTENTION_BACKEND_CHOICES = ["triton", "flashinfer"]
add_attention_backend_choices = ATTENTION_BACKEND_CHOICES.extend
BOTH = LOAD_FORMAT_CHOICES + ["gguf"]


class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--schedule-policy", type=str, choices=["lpm", "fcfs"])
        parser.add_argument("--load-format", choices=BOTH)
        parser.add_argument("--attention-backend", choices=sorted(ATTENTION_BACKEND_CHOICES))
        parser.add_argument("--log-level-http", type=int, choices=[0, 1, 2])
        parser.add_argument("--tool-call-parser", choices=list(Parser.Enum.keys()))
        parser.add_argument("--ratio", type=float, choices=[0.5, 1.0])
        parser.add_argument("--grammar", choices=IMPORTED_CHOICES)


@dataclasses.dataclass
class ExecArgs:
    sampling_backend: A[str, Arg(help="h", choices=["flashinfer", "pytorch"])] = "flashinfer"
'''


def test_choices_are_read_where_they_are_literal_lists_and_open_where_upstream_lets_plugins_extend_them():
    got = {f.name: f for f in sglang_cli.parse(CHOICES)}
    assert got["schedule-policy"].choices == ("lpm", "fcfs") and not got["schedule-policy"].open_choices
    assert got["load-format"].choices == ("auto", "pt", "gguf")
    assert got["attention-backend"].choices == ("triton", "flashinfer") and got["attention-backend"].open_choices
    assert got["log-level-http"].choices == ("0", "1", "2")
    assert got["sampling-backend"].choices == ("flashinfer", "pytorch")
    # built at run time, compared after a type= fleet does not apply, or a name from another module: not judged
    assert got["tool-call-parser"].choices is None and got["ratio"].choices is None and got["grammar"].choices is None


def test_a_list_defined_twice_differently_is_not_judged():
    lists = sglang_cli.named_lists(['X = ["a"]\n', 'X = ["b"]\n', 'Y = ["c"]\n', 'Y = ["c"]\n'])
    assert lists["X"].values is None and lists["Y"].values == ("c",)


def test_a_value_outside_the_releases_choices_is_named_with_the_nearest_one():
    def flag(values: tuple[str, ...] | None, opened: bool = False) -> Flag:
        return Flag("attention-backend", False, choices=values, open_choices=opened)

    t = sglang_cli.build([("0.5.9", {"attention-backend": flag(("triton", "flashinfer"), True)}),
                          ("0.5.14", {"attention-backend": flag(("triton", "flashinfer", "fa4"), True)}),
                          ("0.5.20", {"attention-backend": flag(None)})])
    assert [c.spans for c in t.flags["attention-backend"].choices or []] == [[["0.5.9", "0.5.9"]],
                                                                             [["0.5.14", "0.5.14"]]]
    assert t.value_problem("attention-backend", "flashinfr", "0.5.9") == (
        "--attention-backend 'flashinfr' is not one of sglang 0.5.9's choices (triton, flashinfer; plugins may add "
        "more); did you mean flashinfer?")
    assert t.value_problem("attention-backend", "fa4", "0.5.9") is not None
    assert t.value_problem("attention-backend", "fa4", "0.5.15") is None
    assert t.value_problem("attention-backend", "fa4", "0.5.10") is None  # 0.5.14 takes it: 0.5.10 may
    assert t.value_problem("attention-backend", "fa5", "0.5.10") is not None  # neither 0.5.9 nor 0.5.14 does
    assert t.value_problem("attention-backend", "fa5", "0.5.14.post1") is None  # newer than the 0.5.14 of the table
    assert t.value_problem("attention-backend", "anything", "0.5.20") is None  # no readable choices there
    assert t.value_problem("attention-backend", "anything", "0.5.8") is None  # older than the table
    assert t.value_problem("attention-backend", "triton fa4", "0.5.9").startswith("--attention-backend 'fa4'")
    assert sglang_cli.Table.model_validate(__import__("yaml").safe_load(sglang_cli.dump(t))) == t


TYPED = '''
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--max-running-requests", type=int)
        parser.add_argument("--mem-fraction-static", type=float)
        parser.add_argument("--json-model-override-args", type=json.loads)


@dataclasses.dataclass
class ScheduleArgs:
    chunked_prefill_size: A[Optional[int], "The maximum number of tokens in a chunk."] = None
    ratio: A[float | None, "r"] = None
    max_total_tokens: A[Optional[int], Arg(help="h", type_parser=human_readable_int)] = None
    mode: A[Literal["off", "daemon"], "m"] = "off"
    level: A[Literal[0, 1, 2], "l"] = 0
    sizes: A[List[int], "s"] = None
'''


def test_types_follow_argparse_and_add_cli_args_from_dataclass():
    got = {f.name: f for f in sglang_cli.parse(TYPED)}
    assert [got[n].kind for n in ("max-running-requests", "mem-fraction-static", "json-model-override-args")] == [
        "int", "float", None]
    assert got["chunked-prefill-size"].kind == "int" and got["ratio"].kind == "float" and got["sizes"].kind == "int"
    assert got["max-total-tokens"].kind is None  # sglang's own parser (4k, 1M): not judged
    assert got["mode"].choices == ("off", "daemon") and got["mode"].kind is None
    assert got["level"].choices == ("0", "1", "2") and got["level"].kind == "int"


def test_a_value_argparse_cannot_convert_is_named():
    t = sglang_cli.build([("0.5.9", {"max-running-requests": Flag("max-running-requests", False, kind="int"),
                                     "mem-fraction-static": Flag("mem-fraction-static", False, kind="float")})])
    assert t.value_problem("max-running-requests", "many", "0.5.9") == (
        "--max-running-requests takes a whole number (sglang's type=int), not 'many'")
    assert t.value_problem("max-running-requests", 1000.0, "0.5.9") is not None  # int('1000.0') fails in argparse
    assert t.value_problem("max-running-requests", 64, "0.5.9") is None
    assert t.value_problem("mem-fraction-static", "0.85", "0.5.9") is None
    assert t.value_problem("mem-fraction-static", "most", "0.5.9").startswith("--mem-fraction-static takes a number")
