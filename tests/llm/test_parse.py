"""Reply parsing: one action number from prose, code fences or JSON; anything else is a named error."""

from __future__ import annotations

import pytest

from policies.llm import extract_number, parse_action

LEGAL = {0, 3, 12, 21}


@pytest.mark.parametrize(
    ("reply", "number"),
    [
        ("12", 12),
        (" 12\n", 12),
        ("I will admit the cardiac patient: 12.", 12),
        ("Action: 21", 21),
        ("action 3", 3),
        ("**12**", 12),
        ('{"action": 12}', 12),
        ('{"action_id": "3"}', 3),
        ('```json\n{"action": 21}\n```', 21),
        ("```\n12\n```", 12),
        ("Patient [3] is critical and bed [0] is free, so: action 12", 12),
        ("Reasoning: severity 5 first, 2 beds free.\n\n12", 12),
    ],
)
def test_extract_number__finds_the_one_answer(reply: str, number: int) -> None:
    assert extract_number(reply) == (number, None)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (None, "empty_reply"),
        ("   ", "empty_reply"),
        ("I am not sure what to do.", "no_action_number"),
        ("Patient [3] should go to bed [1].", "no_action_number"),  # bracketed indices are not answers
        ("Either 3 or 12 would work.", "ambiguous_reply"),
        ("Give 0.5 of a dose", "no_action_number"),
    ],
)
def test_extract_number__names_what_is_wrong(reply: str | None, error: str) -> None:
    assert extract_number(reply) == (None, error)


def test_parse_action__a_number_that_is_not_legal_is_illegal_with_the_number() -> None:
    assert parse_action("7", LEGAL) == (None, "illegal_action_7")
    assert parse_action("-1", LEGAL) == (None, "illegal_action_-1")
    assert parse_action("The answer is 12", LEGAL) == (12, None)
    assert parse_action("", LEGAL) == (None, "empty_reply")
