"""`POST /v1/pii/resolve` takes tokens only: anything else is refused before a query runs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.gateway.rest.pii import ResolveRequest

TOKEN = "\u27e8EMAIL_0123456789abcdef\u27e9"


def test_a_token_of_our_format_is_accepted() -> None:
    assert ResolveRequest(tokens=[TOKEN]).tokens == [TOKEN]


@pytest.mark.parametrize(
    "bad",
    [
        "a\x00b",
        "jane@example.org",
        "\u27e8EMAIL_XYZ\u27e9",
        TOKEN + " ",
        "",
        "\u27e8email_0123456789abcdef\u27e9",
    ],
)
def test_anything_else_is_refused_naming_the_field(bad: str) -> None:
    # A NUL reached Postgres and came back as a 500 under fuzzing; now it is a 422.
    with pytest.raises(ValidationError) as refused:
        ResolveRequest(tokens=[TOKEN, bad])
    assert refused.value.errors()[0]["loc"] == ("tokens", 1)
