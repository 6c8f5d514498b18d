"""A request and its response as one ``exchange`` event: the record both sources report.

Owns :func:`exchange_event`, the dict the proxy (:mod:`.proxy`) and the capture reader
(:mod:`.capture`) give their sinks for every request/response pair (or a request never
answered, or a Produce with acks=0 that has no answer), so the text, JSON lines and the
timeline page read one format whatever saw the traffic.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from kproto.net.wire import printable_tree
from kproto.tools.trace.decode import DecodedRequest, DecodedResponse, api_name
from kproto.tools.trace.summaries import TopicNames, error_names, summarize

__all__ = ["exchange_event"]


def exchange_event(*, conn: str, client: str, broker: str, node: Optional[int], t: float,
                   t_end: float, request: DecodedRequest, req_bytes: int,
                   response: Optional[DecodedResponse], resp_bytes: int, names: TopicNames,
                   keep_trees: bool, rewritten: Sequence[Any] = (), problem: Optional[str] = None,
                   unanswered: bool = False, one_way: bool = False) -> dict[str, Any]:
    """The ``exchange`` event of a request (and its response, when one came)."""
    answer = response.message if response is not None else None
    event: dict[str, Any] = {
        "kind": "exchange", "t": t, "t_end": t_end, "conn": conn,
        "client_id": request.client_id, "client": client, "broker": broker, "node": node,
        "api": api_name(request.api_key), "api_key": request.api_key,
        "version": request.api_version, "correlation_id": request.correlation_id,
        "latency_ms": round((t_end - t) * 1000, 3), "req_bytes": req_bytes,
        "resp_bytes": resp_bytes,
        "summary": summarize(request.api_key, request.message, answer, names),
        "errors": error_names(answer) if answer is not None else [],
    }
    if request.error:
        event["request_error"] = request.error
    if response is not None and response.error:
        event["response_error"] = response.error
    if unanswered:
        event["unanswered"] = True
    if one_way:
        event["one_way"] = True
    if rewritten:
        event["rewritten"] = [list(c) for c in rewritten]
    if problem:
        event["rewrite_problem"] = problem
    if keep_trees:
        if request.message is not None:
            event["request"] = printable_tree(request.message)
        if answer is not None:
            event["response"] = printable_tree(answer)
    return event
