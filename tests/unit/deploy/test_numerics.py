"""fleet.deploy.numerics: greedy answers of the new release against the old one's, before traffic."""

from __future__ import annotations

from fleet.deploy.numerics import Answer, compare

OLD = [Answer("2+2=", (19,)), Answer("rivers", (1, 2, 3, 4, 5, 6)), Answer("primes", (7, 8, 9, 10, 11))]


def test_the_same_answers_pass():
    verdict = compare(OLD, list(OLD))
    assert verdict.ok and verdict.compared == 3 and not verdict.parted


def test_an_answer_that_parts_fails_and_says_where():
    new = [OLD[0], Answer("rivers", (1, 2, 3, 4, 9, 9)), OLD[2]]
    verdict = compare(OLD, new)
    assert not verdict.ok
    assert verdict.reasons() == ["'rivers': the answers part at token 4 (old 6 tokens, new 6)"]


def test_a_prefix_the_playbook_accepts_passes_and_a_shorter_answer_parts_where_it_ends():
    new = [OLD[0], Answer("rivers", (1, 2, 3, 4, 9, 9)), Answer("primes", (7, 8, 9, 10))]
    assert compare(OLD, new, match_tokens=4).ok
    assert [p.at for p in compare(OLD, new).parted] == [4, 4]
    assert not compare(OLD, [*new[:2], Answer("primes", (7, 8))], match_tokens=4).ok  # ends inside the prefix


def test_a_tolerance_lets_a_share_of_prompts_part():
    new = [OLD[0], Answer("rivers", (0,)), OLD[2]]
    assert not compare(OLD, new, max_mismatch=0.3).ok
    assert compare(OLD, new, max_mismatch=0.34).ok


def test_a_prompt_left_unanswered_parts_at_its_first_token_and_no_prompts_is_no_pass():
    assert compare(OLD, OLD[:2]).parted[0].at == 0
    assert not compare([], []).ok
