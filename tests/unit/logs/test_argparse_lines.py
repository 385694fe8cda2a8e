"""What argparse prints when sglang's parser refuses its command line: the error is CONFIG_REFUSED, and the usage
block above it (every flag of the release, --nccl-port and --dist-timeout among them) is no collective timeout."""

from __future__ import annotations

from fleet.logs.classify import classify_line, classify_text

USAGE = "                    [--nccl-port NCCL_PORT] [--dist-timeout DIST_TIMEOUT]"
AMBIGUOUS = ("sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
             "--cuda-graph-max-bs-prefill")


def test_a_usage_line_naming_nccl_and_timeout_flags_is_not_a_collective_timeout():
    assert classify_line(USAGE) is None


def test_argparses_refusal_is_config_refused():
    verdict = classify_text("usage: sglang serve [-h] --model-path MODEL_PATH\n" + USAGE + "\n" + AMBIGUOUS + "\n")
    assert verdict.log_class == "CONFIG_REFUSED" and verdict.event is not None and verdict.event.text == AMBIGUOUS
    assert classify_text("launch_server.py: error: argument --tp-size: invalid int value: 'eight'\n"
                         ).log_class == "CONFIG_REFUSED"


def test_a_real_nccl_timeout_still_is_one():
    line = classify_line("NCCL WARN Net : Connection to 10.0.0.2 timed out")
    assert line is not None and line.rule.log_class == "COLLECTIVE_TIMEOUT"
