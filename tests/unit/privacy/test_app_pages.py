"""An MCP Apps page embedded in a tool's result is never tokenised into a broken page: passed
unchanged when it holds nothing to tokenise, withheld (naming the kinds) when it does."""

from __future__ import annotations

from shared.privacy.detect import ALL_KINDS, Kind
from shared.privacy.tokens import Tokenizer
from shared.sandbox.privacy import without_unsafe_app_pages
from shared.tools.apps import APP_MIME_TYPE


def _embedded(html: str, mime: str = APP_MIME_TYPE) -> dict[str, object]:
    return {
        "type": "resource",
        "resource": {"uri": "ui://dash/app.html", "mimeType": mime, "text": html},
    }


def test_a_page_with_personal_data_is_withheld_and_a_clean_one_passes() -> None:
    tok = Tokenizer(b"k" * 32)
    clean = _embedded("<html><script>let n = 42;</script></html>")
    leaky = _embedded("<html><script>let card = 4111111111111111;</script></html>")
    text = {"type": "text", "text": "mail jane.doe@example.com"}
    shown = without_unsafe_app_pages(tok, [text, clean, leaky], ALL_KINDS)
    assert shown[:2] == [text, clean]  # plain text is the tokenizer's to replace
    assert shown[2]["type"] == "text"
    assert "ui://dash/app.html was withheld" in shown[2]["text"] and "CARD" in shown[2]["text"]
    assert "4111" not in str(shown)
    assert tok.produced == {}  # nothing was tokenised on the way


def test_only_apps_pages_of_the_kinds_asked_are_withheld() -> None:
    tok = Tokenizer(b"k" * 32)
    html = "<p>jane.doe@example.com</p>"
    other = _embedded(html, mime="text/html")  # not an Apps page: tokenised as any text
    assert without_unsafe_app_pages(tok, [other], ALL_KINDS) == [other]
    page = _embedded(html)
    assert without_unsafe_app_pages(tok, [page], frozenset({Kind.CARD})) == [page]
    assert without_unsafe_app_pages(tok, [page], frozenset()) == [page]
    assert without_unsafe_app_pages(tok, {"structured": html}, ALL_KINDS) == {"structured": html}
