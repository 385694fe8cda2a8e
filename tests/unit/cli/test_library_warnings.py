"""Python warnings on the terminal (issue 46, finding 12, newcomer h-new25's form): a site rule written with grep's
habit, `'No space left on device [[:digit:]]+'`, made `inv classify --rules DIR` (and every task loading the rules)
print re's own FutureWarning, raw, twice, naming fleet's source lines and not the rule:

    /.../fleet/logs/rules.py:56: FutureWarning: Possible nested set at position 25
      re.compile(pattern)
    /.../fleet/logs/rules.py:258: FutureWarning: Possible nested set at position 25
      if not any(re.search(p, example, flags) for p in self.regex):
    error: /tmp/rules/site.yaml:3: rule 'disk_errors': example 'No space left on device 28' matches none of the regexes

The rule is refused with one line saying why (Python's re reads `[[:digit:]]` as a set of its letters), and any
library's Python warning goes where its log records go (fleet.cli.liblog: `-v`), never raw on stderr."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

from fleet.cli import liblog
from fleet.logs.rules import RULES_DIR

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"
SITE_RULE = """\
description: the site's own rules
rules:
  - name: disk_errors
    class: FATAL
    severity: fatal
    priority: 50
    regex:
      - 'No space left on device [[:digit:]]+'
    explanation: the disk is full
    remedy: free some space on the host
    examples:
      - "No space left on device 28"
    sources:
      - {"project": "Linux", "ref": "https://man7.org/linux/man-pages/man3/errno.3.html",
         "literal": "No space left on device"}
"""


def test_a_rule_in_greps_spelling_is_refused_in_one_line_and_no_warning_is_printed(tmp_path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES_DIR, rules)
    (rules / "site.yaml").write_text(SITE_RULE)
    log = tmp_path / "x.log"
    log.write_text("OSError: [Errno 28] No space left on device 28\n")
    done = subprocess.run([str(INV), "classify", str(log), "--rules", str(rules)], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Warning" not in done.stderr and "re.compile" not in done.stderr, done.stderr  # fails before: twice
    assert done.stderr.startswith(f"error: {rules / 'site.yaml'}:7: rule 'disk_errors': regex: bad regex 'No space "
                                  "left on device [[:digit:]]+': Possible nested set at position 25 ([[:digit:]] is "
                                  "grep's class, which Python's re reads as a set of its letters: write \\d, \\s, \\w "
                                  "or a range such as [0-9])"), done.stderr


def test_a_librarys_python_warning_is_held_for_verbose_not_printed(monkeypatch, capsys):
    monkeypatch.setattr(liblog.HELD, "records", type(liblog.HELD.records)(maxlen=liblog.KEPT))
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [h for h in root.handlers if h is not liblog.HELD])
    monkeypatch.setattr(logging, "_warnings_showwarning", None)  # captureWarnings' own state, as in a fresh process
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as outside pytest (its filter here is "error")
        liblog.install()
        warnings.warn_explicit("TripleDES has been moved", UserWarning, "/x/paramiko/transport.py", 51)
    assert capsys.readouterr().err == ""  # fails before: printed raw, with the file and line
    assert liblog.lines() == ["py.warnings: /x/paramiko/transport.py:51: UserWarning: TripleDES has been moved"]
