"""The default ``retry_on`` against LangGraph's on HTTP and connection errors.

Both retry an HTTP status error for 5xx only (or without a response). The one
difference is deliberate: LangGraph retries a requests ``HTTPError`` of any
status, because its check reads the ``Response`` as a bool, which is False
for a 4xx/5xx (docs/compatibility.md). Probe5 found threadloom retrying httpx
404/429 and never retrying requests' 5xx (both ``OSError`` subclasses).
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import httpx
import pytest
from langgraph._internal._retry import default_retry_on as lg_default_retry_on

from threadloom.graph import START, StateGraph
from threadloom.types import RetryPolicy, default_retry_on

requests = pytest.importorskip("requests")  # (LangGraph's own check imports it)


def _httpx(code: int) -> httpx.HTTPStatusError:
    req = httpx.Request("GET", "http://api.example/x")
    return httpx.HTTPStatusError("boom", request=req, response=httpx.Response(code, request=req))


def _requests(code: int | None) -> requests.HTTPError:
    if code is None:
        return requests.HTTPError("boom")
    resp = requests.Response()
    resp.status_code = code
    return requests.HTTPError("boom", response=resp)


SAME = [
    _httpx(404),
    _httpx(429),
    _httpx(500),
    _httpx(503),
    _requests(500),
    _requests(None),
    httpx.ConnectError("refused"),
    requests.ConnectionError("refused"),
    ConnectionResetError(),
    ValueError("bad"),
    OSError("disk"),
    Exception("other"),
]


@pytest.mark.parametrize("exc", SAME, ids=lambda e: f"{type(e).__name__}")
def test_same_answer_as_langgraph(exc: Exception) -> None:
    assert default_retry_on(exc) == lg_default_retry_on(exc)


@pytest.mark.parametrize("code", [400, 401, 404, 429])
def test_a_requests_4xx_is_not_retried(code: int) -> None:
    assert lg_default_retry_on(_requests(code))  # LangGraph's falsy-Response slip
    assert not default_retry_on(_requests(code))


class S(TypedDict):
    calls: Annotated[list, operator.add]


@pytest.mark.parametrize(("code", "attempts"), [(404, 1), (503, 3)])
def test_a_node_is_retried_for_5xx_only(code: int, attempts: int) -> None:
    calls: list[int] = []

    def fetch(state: S) -> dict:
        calls.append(code)
        raise _httpx(code)

    g = StateGraph(S)
    g.add_node("fetch", fetch, retry_policy=RetryPolicy(initial_interval=0.001, jitter=False))
    g.add_edge(START, "fetch")
    with pytest.raises(httpx.HTTPStatusError):
        g.compile().invoke({"calls": []})
    assert len(calls) == attempts
