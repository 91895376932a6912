"""The test's own client while a fault lasts: what the gateway answered, the fault table's HTTP columns.

A background thread submits an execution and reads one of the burst's executions every
0.5 s. During a Redis or Postgres outage 503 with ``Retry-After`` and our error envelope
is the intended answer ("come back later"); any other 5xx (a plain 500, a 502, a 503
without the envelope) is a failure of the gateway, and so is an answer slower than the
client's 10 s timeout (a hang).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

# Longer than this is a hang, whatever the status.
CLIENT_TIMEOUT_S = 10.0


class _HasURL(Protocol):
    @property
    def gateway_url(self) -> str: ...


@dataclass(frozen=True)
class Answer:
    """One request the prober made and what came back."""

    request: str
    status: int
    seconds: float
    body: dict[str, Any]
    retry_after: str | None


@dataclass
class Prober:
    """POSTs a submission and GETs one of ``read_ids`` every 0.5 s until the block exits."""

    gateway: _HasURL
    read_ids: list[str] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    hung: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Prober:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        rounds = 0
        with httpx.Client(base_url=self.gateway.gateway_url, timeout=CLIENT_TIMEOUT_S) as client:
            while not self._stop.is_set():
                self._ask(client, "POST", "/v1/executions", {"code": "return 1"})
                if self.read_ids:
                    read = self.read_ids[rounds % len(self.read_ids)]
                    self._ask(client, "GET", f"/v1/executions/{read}", None)
                rounds += 1
                self._stop.wait(0.5)

    def _ask(self, client: httpx.Client, method: str, url: str, body: object) -> None:
        started = time.monotonic()
        try:
            response = client.request(method, url, json=body)
        except httpx.HTTPError as exc:
            self.hung.append(f"{method} {url}: {exc!r}")
            return
        self.answers.append(
            Answer(
                f"{method} {url}",
                response.status_code,
                time.monotonic() - started,
                _json(response),
                response.headers.get("Retry-After"),
            )
        )

    def unexpected_5xx(self) -> list[Answer]:
        """Every 5xx that is not our 503 envelope with ``Retry-After``."""
        return [a for a in self.answers if a.status >= 500 and not _our_503(a)]

    def columns(self) -> dict[str, object]:
        """The row's HTTP columns: our 503s, other 5xx (must be 0), hangs (must be 0)."""
        return {
            "http_503": sum(_our_503(a) for a in self.answers),
            "http_5xx_not_503": len(self.unexpected_5xx()),
            "hung": len(self.hung),
            "http_max_s": round(max((a.seconds for a in self.answers), default=0.0), 2),
            "http_slowest": _describe(max(self.answers, key=lambda a: a.seconds, default=None)),
        }

    def check(self, *, outage: bool) -> None:
        """No other 5xx, no hang; with ``outage``, the fault was seen (some answer was a 503)."""
        assert not self.unexpected_5xx(), self.unexpected_5xx()
        assert not self.hung, self.hung
        if outage:
            assert any(_our_503(a) for a in self.answers), "no 503 seen during the outage"


def _describe(answer: Answer | None) -> str | None:
    if answer is None:
        return None
    error = answer.body.get("error")
    why = f" {str(error.get('message'))[:120]!r}" if isinstance(error, dict) else ""
    return f"{answer.request.split('/v1/')[0]}{answer.status}{why}"


def _our_503(answer: Answer) -> bool:
    error = answer.body.get("error")
    return (
        answer.status == 503
        and bool(answer.retry_after)
        and isinstance(error, dict)
        and error.get("type") == "unavailable"
    )


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {"text": response.text[:200]}
    return body if isinstance(body, dict) else {"body": body}
