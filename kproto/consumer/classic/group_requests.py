"""The group-membership requests of the classic protocol, sans-IO.

Owns which version of JoinGroup / SyncGroup / Heartbeat / LeaveGroup the coordinator
uses (``choose_version``, capped at ``MAX_VERSIONS``), how each request is
built for that version (fields a version lacks are left at their defaults), and a
tolerant second reading of the error answers the librdkafka mock cluster writes with null
strings/bytes where the schema forbids them (otherwise the strict decoder closes the
connection and the error code is lost).
"""

from __future__ import annotations

import struct
from typing import Any, Optional, Sequence

from kproto import errors
from kproto.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kproto.net.client_versions import client_max_version

# The newest versions used. These are librdkafka's: the librdkafka mock cluster advertises
# newer ones than it can parse (JoinGroup v6 and SyncGroup v4 close the connection, LeaveGroup
# v3+ answers in the v0 layout), and nothing the consumer needs came later (JoinGroup v5 and
# SyncGroup/Heartbeat v3 carry group_instance_id; static members never send LeaveGroup).
MAX_VERSIONS = {JoinGroupRequest.api_key: 5, SyncGroupRequest.api_key: 3, HeartbeatRequest.api_key: 4,
                LeaveGroupRequest.api_key: 2}


def choose_version(request_cls: Any, supported: tuple[int, int], node: Any = None) -> int:
    """The highest version both sides support, capped at ``MAX_VERSIONS`` unless the broker
    no longer accepts the capped one (then its lowest)."""
    low, high = supported
    top = min(high, client_max_version(request_cls))
    bottom = max(low, request_cls.min_version)
    if top < bottom:
        raise errors.UnsupportedVersionError("no common version of {} with coordinator {} (broker {}-{})".format(
            request_cls.__name__, node, low, high))
    return max(bottom, min(top, MAX_VERSIONS.get(request_cls.api_key, top)))


def build_join_group(version: int, group_id: str, member_id: str, group_instance_id: Optional[str],
                     session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                     protocols: Sequence[tuple[str, bytes]], reason: str = "") -> Any:
    """JoinGroup; static membership (``group_instance_id``) needs v5+."""
    request = LenientJoinGroupRequest(
        group_id=group_id, session_timeout_ms=session_timeout_ms, member_id=member_id, protocol_type=protocol_type,
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols])
    if version >= 1:
        request.rebalance_timeout_ms = rebalance_timeout_ms
    if group_instance_id is not None:
        if version < 5:
            raise errors.UnsupportedVersionError(
                "group_instance_id (static membership) needs JoinGroup v5+, the coordinator speaks v{}".format(version))
        request.group_instance_id = group_instance_id
    if version >= 8:
        request.reason = reason[:255] or None
    return request


def build_sync_group(version: int, group_id: str, generation_id: int, member_id: str,
                     group_instance_id: Optional[str], protocol_type: str, protocol_name: Optional[str],
                     assignments: dict[str, bytes]) -> Any:
    """SyncGroup; ``assignments`` is empty for followers."""
    request = LenientSyncGroupRequest(
        group_id=group_id, generation_id=generation_id, member_id=member_id,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                     for m, a in assignments.items()])
    if version >= 3:
        request.group_instance_id = group_instance_id
    if version >= 5:
        request.protocol_type = protocol_type
        request.protocol_name = protocol_name
    return request


def build_heartbeat(version: int, group_id: str, generation_id: int, member_id: str,
                    group_instance_id: Optional[str]) -> Any:
    request = HeartbeatRequest(group_id=group_id, generation_id=generation_id, member_id=member_id)
    if version >= 3:
        request.group_instance_id = group_instance_id
    return request


def build_leave_group(version: int, group_id: str, member_id: str, reason: str) -> Any:
    """LeaveGroup of one dynamic member (v3+ batches members; v5 carries the reason)."""
    if version < 3:
        return LeaveGroupRequest(group_id=group_id, member_id=member_id)
    identity = LeaveGroupRequest.MemberIdentity(member_id=member_id)
    if version >= 5:
        identity.reason = reason[:255]
    return LeaveGroupRequest(group_id=group_id, members=[identity])


class LenientSyncGroupResponse(SyncGroupResponse):
    """SyncGroupResponse that also reads the librdkafka mock cluster's error answers.

    The mock writes a null ``assignment`` in SyncGroup error answers, where the schema says
    non-nullable; the strict decoder then fails and the connection is closed, losing the
    error code (usually REBALANCE_IN_PROGRESS). Only error answers of the non-flexible
    versions get this second reading.
    """

    @classmethod
    def decode(cls, data: Any, version: int, *, allow_trailing: bool = False) -> Any:
        try:
            return super().decode(data, version, allow_trailing=allow_trailing)
        except errors.CorruptMessageError:
            fields = _read_error_answer(bytes(data), version >= 1, ">hi")
            if fields is None or version >= 4 or fields[1] != -1:
                raise
            return SyncGroupResponse(throttle_time_ms=fields[-1], error_code=fields[0], assignment=b"")


class LenientJoinGroupResponse(JoinGroupResponse):
    """JoinGroupResponse that also reads the mock's error answers (null strings where the
    schema says non-nullable); see ``LenientSyncGroupResponse``."""

    @classmethod
    def decode(cls, data: Any, version: int, *, allow_trailing: bool = False) -> Any:
        try:
            return super().decode(data, version, allow_trailing=allow_trailing)
        except errors.CorruptMessageError:
            body = bytes(data)
            fields = _read_error_answer(body, version >= 2, ">hi")
            if fields is None or version >= 6:
                raise
            error_code, generation_id, throttle = fields
            pos = (4 if version >= 2 else 0) + 6
            strings = []
            for _ in range(3):  # protocol name, leader, member id
                if pos + 2 > len(body):
                    raise
                (length,) = struct.unpack_from(">h", body, pos)
                pos += 2
                if length > 0:
                    strings.append(body[pos:pos + length].decode("utf-8", "replace"))
                    pos += length
                else:
                    strings.append("")
            return JoinGroupResponse(throttle_time_ms=throttle, error_code=error_code, generation_id=generation_id,
                                     protocol_name=strings[0], leader=strings[1], member_id=strings[2])


def _read_error_answer(body: bytes, throttled: bool, layout: str) -> Optional[tuple[Any, ...]]:
    """(error code, the next field, throttle) of an error answer, or None if it is not one."""
    head = 4 if throttled else 0
    if len(body) < head + struct.calcsize(layout):
        return None
    error_code, nxt = struct.unpack_from(layout, body, head)
    if error_code == errors.ErrorCode.NONE:
        return None
    throttle = struct.unpack_from(">i", body, 0)[0] if throttled else 0
    return error_code, nxt, throttle


class LenientSyncGroupRequest(SyncGroupRequest):
    response_class = LenientSyncGroupResponse


class LenientJoinGroupRequest(JoinGroupRequest):
    response_class = LenientJoinGroupResponse
