"""The one-line summaries: every API's line carries its fields (generated messages built
here with their schema defaults, and filled as a client would fill them)."""

from __future__ import annotations

from kproto import messages
from kproto.tools.trace.report import format_line
from kproto.tools.trace.summaries import TopicNames, summarize


def test_every_api_summarizes_its_plain_fields_without_failing():
    quiet = {"throttle_time_ms", "error_message", "replica_id", "include_authorized_operations",
             "cluster_authorized_operations", "authorized_operations", "replica_state", "records"}
    for api_key, (request_cls, response_cls) in sorted(messages.API_KEYS.items()):
        request, response = request_cls(), response_cls()
        summary = summarize(api_key, request, response, TopicNames())
        plain = [f for message in (request, response) for f in message._fields
                 if f not in quiet and not f.endswith("error_code")
                 and not isinstance(getattr(message, f), list) and getattr(message, f) is not None]
        assert summary or not plain, (request_cls.__name__, plain)


def test_offset_for_leader_epoch_shows_epochs_and_end_offsets():
    req_cls, resp_cls = messages.API_KEYS[23]
    request = req_cls(topics=[req_cls.OffsetForLeaderTopic(topic="orders", partitions=[
        req_cls.OffsetForLeaderPartition(partition=2, current_leader_epoch=5,
                                                              leader_epoch=4)])])
    response = resp_cls(topics=[resp_cls.OffsetForLeaderTopicResult(topic="orders", partitions=[
        resp_cls.EpochEndOffset(partition=2, leader_epoch=4,
                                                           end_offset=1200)])])
    summary = summarize(23, request, response, TopicNames())
    assert summary == {"epochs": ["orders-2 epoch=4 (current 5)"],
                       "end_offsets": ["orders-2 epoch=4 @1200"]}


def test_apis_without_a_summary_of_their_own_show_lists_item_by_item():
    req_cls, resp_cls = messages.API_KEYS[15]  # DescribeGroups
    response = resp_cls(groups=[resp_cls.DescribedGroup(group_id="billing", group_state="Stable",
                                                        protocol_type="consumer", protocol_data="range")])
    summary = summarize(15, req_cls(groups=["billing"]), response, TopicNames())
    assert summary["groups"] == ["billing"]
    assert summary["groups_out"] == ["group_id=billing,group_state=Stable,protocol_type=consumer,"
                                     "protocol_data=range"]
    line = format_line({"kind": "exchange", "t": 0.0, "t_end": 0.001, "conn": "c1", "broker": "b",
                        "node": 1, "api": "DescribeGroups", "version": 5, "correlation_id": 3,
                        "latency_ms": 1.0, "summary": summary, "errors": [], "client_id": "app"})
    assert "DescribeGroups v5 #3 1.0ms groups=[billing] groups_out=[group_id=billing," in line
