"""Messages read from Python source as they print: f-strings, implicit concatenation, held messages."""

from __future__ import annotations

from fleet.upstream import sourcetext

SOURCE = '''
def check(x, world):
    if x:
        raise ValueError(
            f"{cls_name} is disabled because it's not supported on"
            " more than two PCIe-only GPUs."
        )
    assert world > 0, f"world size {world} must be positive"
    logger.error("Rank %d scheduler is dead." % 3)
    logger.info("not a failure")
    msg = "The memory capacity is unbalanced. "
    msg += f"{world=}"
    raise RuntimeError(msg)


def later(proc):
    return RuntimeError(f"Rank {proc} scheduler died during initialization (exit code: {proc.exitcode}).")
'''


def test_templates_render_placeholders_and_join_pieces():
    texts = sourcetext.templates(SOURCE)
    assert "{} is disabled because it's not supported on more than two PCIe-only GPUs." in texts
    assert sourcetext.contains(SOURCE, "{} is disabled because it's not supported on more than two", True)
    assert not sourcetext.contains(SOURCE, "is disabled because it is not", True)


def test_sites_are_raises_asserts_built_exceptions_and_error_logs():
    got = [(s.kind, s.exception, s.text) for s in sourcetext.sites(SOURCE)]
    assert got == [
        ("raise", "ValueError", "{} is disabled because it's not supported on more than two PCIe-only GPUs."),
        ("assert", "AssertionError", "world size {} must be positive"),
        ("log", None, "Rank %d scheduler is dead."),
        ("raise", "RuntimeError", "The memory capacity is unbalanced. world={}"),
        ("raise", "RuntimeError", "Rank {} scheduler died during initialization (exit code: {})."),
    ]
    assert sourcetext.sites(SOURCE)[-1].as_line("-9") == \
        "RuntimeError: Rank -9 scheduler died during initialization (exit code: -9)."


def test_a_file_this_python_cannot_parse_has_no_templates_but_is_still_read_as_text():
    broken = "def f(:\n    'Capture cuda graph bs'\n"
    assert sourcetext.templates(broken) == []
    assert sourcetext.contains(broken, "Capture cuda graph bs", True)
    assert sourcetext.templates("\ufeffx = 'with a byte order mark'") == ["with a byte order mark"]
