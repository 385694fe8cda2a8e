"""What a dead run left, as the host names it: a host's answer is hostile, so only lines of the form grep names a
manifest in are manifests (the dry run's `left_behind` raised IndexError on a host that answers escapes)."""

from __future__ import annotations

from fleet.host import leftovers


class Answers:
    """A shell whose every command is answered with `text` (what a hostile host may send)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def sh(self, command: str) -> str:
        return self.text


def test_manifests_are_the_lines_grep_names_them_in():
    named = "/var/lib/fleet/releases/20261205T1-ab/manifest.json\n/var/lib/fleet/releases/20261205T2-cd/manifest.json\n"
    assert leftovers.manifests_with(Answers(named), "/var/lib/fleet", "x") == named.split()


def test_anything_else_a_host_answers_names_no_manifest():
    hostile = ("\x1b[2J\x1b]0;owned\x07 [bold red]x[/]\n/\n/var/lib/fleet/releases//manifest.json\n"
               "/etc/shadow\n/var/lib/fleet/releases/a/b/manifest.json\n/var/lib/fleet/releases/a/manifest.jsonx\n")
    assert leftovers.manifests_with(Answers(hostile), "/var/lib/fleet", "x") == []
