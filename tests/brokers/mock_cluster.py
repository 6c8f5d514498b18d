"""librdkafka's built-in mock Kafka cluster, driven through ctypes.

Owns the ctypes binding to the librdkafka shared library that ships inside the installed
``confluent-kafka`` wheel (``confluent_kafka.libs/librdkafka-*.so.1``) and the
:class:`MockCluster` wrapper: create, fault-inject, inspect and destroy a mock cluster that
listens on 127.0.0.1. The mock cluster lives inside this Python process (librdkafka runs
it on its own threads), so there is no child process to stop; :meth:`MockCluster.close`
destroys it.

The functions are librdkafka's experimental mock API (``rdkafka_mock.h``); the signatures
below were checked against the header of librdkafka 2.x and the symbols of the bundled
2.16 library (``nm -D``). The mock API is not ABI-stable, so every symbol is resolved when
the library is loaded and a missing one fails loudly there, not in the middle of a test.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from tests.brokers.base import BROKER_CAPABILITIES, Broker

log = logging.getLogger("kproto.tests.brokers")

_c_void_p = ctypes.c_void_p
_c_char_p = ctypes.c_char_p
_i16, _i32, _i64 = ctypes.c_int16, ctypes.c_int32, ctypes.c_int64
_int, _size_t = ctypes.c_int, ctypes.c_size_t

# name -> (restype, fixed argtypes). Variadic functions list only their fixed arguments;
# their variadic ints are passed as c_int (what C's default promotions give).
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "rd_kafka_version_str": (_c_char_p, []),
    "rd_kafka_conf_new": (_c_void_p, []),
    "rd_kafka_conf_set": (_int, [_c_void_p, _c_char_p, _c_char_p, _c_char_p, _size_t]),
    "rd_kafka_conf_destroy": (None, [_c_void_p]),
    "rd_kafka_new": (_c_void_p, [_int, _c_void_p, _c_char_p, _size_t]),
    "rd_kafka_destroy": (None, [_c_void_p]),
    "rd_kafka_err2name": (_c_char_p, [_int]),
    "rd_kafka_topic_partition_list_new": (_c_void_p, [_int]),
    "rd_kafka_topic_partition_list_add": (_c_void_p, [_c_void_p, _c_char_p, _i32]),
    "rd_kafka_topic_partition_list_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_cluster_new": (_c_void_p, [_c_void_p, _int]),
    "rd_kafka_mock_cluster_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_cluster_bootstraps": (_c_char_p, [_c_void_p]),
    "rd_kafka_mock_topic_create": (_int, [_c_void_p, _c_char_p, _int, _int]),
    "rd_kafka_mock_topic_set_error": (None, [_c_void_p, _c_char_p, _int]),
    "rd_kafka_mock_clear_request_errors": (None, [_c_void_p, _i16]),
    "rd_kafka_mock_push_request_errors_array": (
        None, [_c_void_p, _i16, _size_t, ctypes.POINTER(_int)]),
    "rd_kafka_mock_broker_push_request_error_rtts": (_int, [_c_void_p, _i32, _i16, _size_t]),
    "rd_kafka_mock_partition_push_request_errors": (
        _int, [_c_void_p, _c_char_p, _i32, _i16, _size_t]),
    "rd_kafka_mock_broker_error_stack_cnt": (
        _int, [_c_void_p, _i32, _i16, ctypes.POINTER(_size_t)]),
    "rd_kafka_mock_partition_set_leader": (_int, [_c_void_p, _c_char_p, _i32, _i32]),
    "rd_kafka_mock_partition_set_follower": (_int, [_c_void_p, _c_char_p, _i32, _i32]),
    "rd_kafka_mock_partition_set_follower_wmarks": (
        _int, [_c_void_p, _c_char_p, _i32, _i64, _i64]),
    "rd_kafka_mock_partition_push_leader_response": (
        _int, [_c_void_p, _c_char_p, _int, _i32, _i32]),
    "rd_kafka_mock_broker_set_down": (_int, [_c_void_p, _i32]),
    "rd_kafka_mock_broker_set_up": (_int, [_c_void_p, _i32]),
    "rd_kafka_mock_broker_set_rtt": (_int, [_c_void_p, _i32, _int]),
    "rd_kafka_mock_broker_set_rack": (_int, [_c_void_p, _i32, _c_char_p]),
    "rd_kafka_mock_coordinator_set": (_int, [_c_void_p, _c_char_p, _c_char_p, _i32]),
    "rd_kafka_mock_set_apiversion": (_int, [_c_void_p, _i16, _i16, _i16]),
    "rd_kafka_mock_start_request_tracking": (None, [_c_void_p]),
    "rd_kafka_mock_stop_request_tracking": (None, [_c_void_p]),
    "rd_kafka_mock_clear_requests": (None, [_c_void_p]),
    "rd_kafka_mock_get_requests": (
        ctypes.POINTER(_c_void_p), [_c_void_p, ctypes.POINTER(_size_t)]),
    "rd_kafka_mock_request_id": (_i32, [_c_void_p]),
    "rd_kafka_mock_request_api_key": (_i16, [_c_void_p]),
    "rd_kafka_mock_request_timestamp": (_i64, [_c_void_p]),
    "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_c_void_p), _size_t]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_c_void_p, _i32]),
    "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms": (None, [_c_void_p, _int]),
    "rd_kafka_mock_set_group_consumer_session_timeout_ms": (None, [_c_void_p, _int]),
    "rd_kafka_mock_cgrp_consumer_target_assignment_new": (
        _c_void_p, [ctypes.POINTER(_c_char_p), _int, ctypes.POINTER(_c_void_p)]),
    "rd_kafka_mock_cgrp_consumer_target_assignment_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_cgrp_consumer_target_assignment": (None, [_c_void_p, _c_char_p, _c_void_p]),
    # KIP-932 share groups (cluster-wide settings: every share group, existing and new).
    "rd_kafka_mock_sharegroup_set_session_timeout": (None, [_c_void_p, _int]),
    "rd_kafka_mock_sharegroup_set_heartbeat_interval": (None, [_c_void_p, _int]),
    "rd_kafka_mock_sharegroup_set_max_delivery_attempts": (None, [_c_void_p, _int]),
    "rd_kafka_mock_sharegroup_set_record_lock_duration": (None, [_c_void_p, _int]),
    "rd_kafka_mock_sharegroup_set_isolation_level": (None, [_c_void_p, _int]),
    "rd_kafka_mock_sharegroup_set_max_size": (None, [_c_void_p, _int]),
    "rd_kafka_mock_sharegroup_set_max_fetch_sessions": (None, [_c_void_p, _int]),
    "rd_kafka_mock_sharegroup_set_max_record_locks": (None, [_c_void_p, _int]),
    "rd_kafka_mock_sharegroup_set_auto_offset_reset": (None, [_c_void_p, _int]),
    "rd_kafka_mock_sharegroup_target_assignment": (
        None, [_c_void_p, _c_char_p, ctypes.POINTER(_c_char_p), ctypes.POINTER(_c_void_p), _size_t]),
    "rd_kafka_mock_sharegroup_get_member_ids": (
        _int, [_c_void_p, _c_char_p, ctypes.POINTER(ctypes.POINTER(_c_char_p)), ctypes.POINTER(_size_t)]),
    "rd_kafka_mem_free": (None, [_c_void_p, _c_void_p]),
}

_RD_KAFKA_PRODUCER = 0
_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


class MockClusterError(RuntimeError):
    """The mock cluster could not be created or refused an operation."""


class TrackedRequest(NamedTuple):
    """One request the mock cluster received while request tracking was on.

    librdkafka records the broker id, the API key and the arrival time only (2.16's
    ``rd_kafka_mock_request_t`` has no version field); to see versions, put a
    :class:`tests.brokers.proxy.BrokerProxy` in front of a 1-broker cluster.
    """

    broker_id: int
    api_key: int
    timestamp_us: int


def library_path() -> str:
    """Path of the librdkafka bundled in the installed confluent-kafka wheel."""
    import confluent_kafka  # the wheel's own package; its .libs folder sits beside it

    site = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    found = sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))
    if not found:
        raise MockClusterError(
            "no librdkafka shared library under {}/confluent_kafka.libs "
            "(is the confluent-kafka wheel installed?)".format(site))
    return found[0]


def load_library() -> ctypes.CDLL:
    """Load librdkafka once and declare every function this module calls."""
    global _lib
    with _lib_lock:
        if _lib is None:
            path = library_path()
            try:
                lib = ctypes.CDLL(path)
            except OSError as exc:
                raise MockClusterError("cannot load librdkafka from {}: {}".format(path, exc)) from exc
            missing = []
            for name, (restype, argtypes) in _SIGNATURES.items():
                try:
                    fn = getattr(lib, name)
                except AttributeError:
                    missing.append(name)
                    continue
                fn.restype = restype
                fn.argtypes = argtypes
            if missing:
                raise MockClusterError("librdkafka at {} lacks {}".format(
                    path, ", ".join(missing)))
            _lib = lib
        return _lib


def _err_name(lib: ctypes.CDLL, code: int) -> str:
    return (lib.rd_kafka_err2name(code) or b"?").decode()


class MockCluster(Broker):
    """A librdkafka mock cluster of ``broker_count`` brokers (ids 1..broker_count).

    Broker ids in the methods below may be -1 for "all brokers" where librdkafka allows it
    (down/up/rtt/rack). Error codes are Kafka protocol error codes (ints); librdkafka's
    internal ``-195`` (``_TRANSPORT``) makes the mock drop the connection instead of
    answering.
    """

    name = "mock"

    def __init__(self, broker_count: int = 3) -> None:
        if broker_count < 1:
            raise ValueError("broker_count must be >= 1")
        super().__init__()
        self._mcluster = self._rk = None
        caps = BROKER_CAPABILITIES["mock"]
        self.capabilities = caps if broker_count > 1 else caps - {"multi_broker"}
        self._lib = lib = load_library()
        self.broker_count = broker_count
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        # The handle only hosts the mock cluster; it must never try to reach a real broker.
        for key, value in ((b"bootstrap.servers", b""), (b"log_level", b"3")):
            if lib.rd_kafka_conf_set(conf, key, value, errstr, len(errstr)) != 0:
                lib.rd_kafka_conf_destroy(conf)
                raise MockClusterError("rd_kafka_conf_set: " + errstr.value.decode())
        rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
        if not rk:  # rd_kafka_new frees conf only on success
            lib.rd_kafka_conf_destroy(conf)
            raise MockClusterError("rd_kafka_new: " + errstr.value.decode())
        self._rk = rk
        self._mcluster = lib.rd_kafka_mock_cluster_new(rk, broker_count)
        if not self._mcluster:
            lib.rd_kafka_destroy(rk)
            self._rk = None
            raise MockClusterError("rd_kafka_mock_cluster_new failed")
        self.bootstrap_servers: str = lib.rd_kafka_mock_cluster_bootstraps(
            self._mcluster).decode()
        log.info("mock cluster up: %s", self.bootstrap_servers)

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._mcluster is None

    def close(self) -> None:
        """Destroy the mock cluster (closes its listeners) and its host handle."""
        if self._mcluster is not None:
            self._lib.rd_kafka_mock_cluster_destroy(self._mcluster)
            self._mcluster = None
        if self._rk is not None:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def _mc(self) -> int:
        if self._mcluster is None:
            raise MockClusterError("mock cluster already destroyed")
        return self._mcluster

    def _check(self, what: str, code: int) -> None:
        if code != 0:
            raise MockClusterError("{} failed: {} ({})".format(
                what, _err_name(self._lib, code), code))

    # --- topics ------------------------------------------------------------------------

    def _create_topic(self, name: str, partitions: int, replication: int) -> None:
        # Leaders are spread over the brokers by librdkafka.
        self._check("create_topic", self._lib.rd_kafka_mock_topic_create(
            self._mc(), name.encode(), partitions, replication))

    def set_topic_error(self, topic: str, code: int) -> None:
        """Error returned for the topic in Metadata (and AddPartitionsToTxn); 0 clears."""
        self._lib.rd_kafka_mock_topic_set_error(self._mc(), topic.encode(), code)

    # --- error injection ---------------------------------------------------------------

    def push_request_errors(self, api_key: int, codes: Sequence[int]) -> None:
        """The next ``len(codes)`` requests of ``api_key`` (to any broker) fail in turn
        with these top-level/ per-partition errors (0 = answer normally)."""
        arr = (_int * len(codes))(*codes)
        self._lib.rd_kafka_mock_push_request_errors_array(self._mc(), api_key, len(codes), arr)

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the cluster-wide error stack of ``api_key``."""
        self._lib.rd_kafka_mock_clear_request_errors(self._mc(), api_key)

    def push_broker_request_errors(self, broker_id: int, api_key: int,
                                   codes: Sequence[int]) -> None:
        """Like :meth:`push_request_errors` for one broker only (no extra delay)."""
        self.push_broker_request_error_rtts(broker_id, api_key, [(c, 0) for c in codes])

    def push_broker_request_error_rtts(self, broker_id: int, api_key: int,
                                       errors_and_rtts: Sequence[tuple[int, int]]) -> None:
        """Push (error code, extra response delay in ms) pairs on one broker's stack for
        ``api_key``; broker stacks take precedence over the cluster-wide one."""
        flat: list[object] = []
        for code, rtt_ms in errors_and_rtts:
            flat += [_int(code), _int(rtt_ms)]
        self._check("push_broker_request_error_rtts",
                    self._lib.rd_kafka_mock_broker_push_request_error_rtts(
                        self._mc(), broker_id, api_key, len(errors_and_rtts), *flat))

    def broker_error_stack_count(self, broker_id: int, api_key: int) -> int:
        """How many pushed errors for ``api_key`` are still waiting on ``broker_id``."""
        cnt = _size_t(0)
        self._check("broker_error_stack_cnt", self._lib.rd_kafka_mock_broker_error_stack_cnt(
            self._mc(), broker_id, api_key, ctypes.byref(cnt)))
        return cnt.value

    def push_partition_request_errors(self, topic: str, partition: int, api_key: int,
                                      codes: Sequence[int]) -> None:
        """Per-partition errors for the next requests of ``api_key`` naming that partition.

        librdkafka 2.16 added this for its share-group (ShareFetch) tests; which other
        request handlers honour it is librdkafka's business (see
        tests/integration/brokers/test_mock_cluster.py for what is verified).
        """
        args = [_int(c) for c in codes]
        self._check("push_partition_request_errors",
                    self._lib.rd_kafka_mock_partition_push_request_errors(
                        self._mc(), topic.encode(), partition, api_key, len(codes), *args))

    # --- brokers -----------------------------------------------------------------------

    def broker_down(self, broker_id: int) -> None:
        """Disconnect the broker's clients and refuse new connections (no leader change)."""
        self._check("broker_set_down", self._lib.rd_kafka_mock_broker_set_down(
            self._mc(), broker_id))

    def broker_up(self, broker_id: int) -> None:
        self._check("broker_set_up", self._lib.rd_kafka_mock_broker_set_up(
            self._mc(), broker_id))

    def broker_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of the broker by ``rtt_ms``."""
        self._check("broker_set_rtt", self._lib.rd_kafka_mock_broker_set_rtt(
            self._mc(), broker_id, rtt_ms))

    def broker_rack(self, broker_id: int, rack: str) -> None:
        self._check("broker_set_rack", self._lib.rd_kafka_mock_broker_set_rack(
            self._mc(), broker_id, rack.encode()))

    # --- partitions --------------------------------------------------------------------

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move leadership (bumps the leader epoch); -1 leaves the partition leaderless."""
        self._check("partition_set_leader", self._lib.rd_kafka_mock_partition_set_leader(
            self._mc(), topic.encode(), partition, broker_id))

    def set_partition_follower(self, topic: str, partition: int, broker_id: int) -> None:
        """Preferred read replica (KIP-392) the leader will redirect fetchers to."""
        self._check("partition_set_follower", self._lib.rd_kafka_mock_partition_set_follower(
            self._mc(), topic.encode(), partition, broker_id))

    def set_partition_follower_wmarks(self, topic: str, partition: int, low: int,
                                      high: int) -> None:
        """Watermarks the follower reports (-1 reverts to the leader's)."""
        self._check("partition_set_follower_wmarks",
                    self._lib.rd_kafka_mock_partition_set_follower_wmarks(
                        self._mc(), topic.encode(), partition, low, high))

    def push_leader_response(self, topic: str, partition: int, leader_id: int,
                             leader_epoch: int) -> None:
        """The next Metadata response reports this leader and epoch for the partition."""
        self._check("partition_push_leader_response",
                    self._lib.rd_kafka_mock_partition_push_leader_response(
                        self._mc(), topic.encode(), partition, leader_id, leader_epoch))

    # --- coordinators, versions, groups -------------------------------------------------

    def set_coordinator(self, key_type: str, key: str, broker_id: int) -> None:
        """``key_type`` is "group" or "transaction"; the broker need not exist."""
        if key_type not in ("group", "transaction"):
            raise ValueError("key_type must be 'group' or 'transaction'")
        self._check("coordinator_set", self._lib.rd_kafka_mock_coordinator_set(
            self._mc(), key_type.encode(), key.encode(), broker_id))

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Limit the versions ApiVersions advertises and the mock accepts (-1, -1 disables
        the API). Versions above librdkafka's implemented maximum are not allowed."""
        self._check("set_apiversion", self._lib.rd_kafka_mock_set_apiversion(
            self._mc(), api_key, min_version, max_version))

    def group_initial_rebalance_delay(self, delay_ms: int) -> None:
        """Classic groups: how long the first JoinGroup round waits for more members."""
        self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._mc(), delay_ms)

    def set_group_consumer_heartbeat_interval(self, interval_ms: int) -> None:
        """KIP-848 groups: the heartbeat interval ConsumerGroupHeartbeat answers with."""
        self._lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(
            self._mc(), interval_ms)

    def set_group_consumer_session_timeout(self, timeout_ms: int) -> None:
        """KIP-848 groups: members silent this long are fenced."""
        self._lib.rd_kafka_mock_set_group_consumer_session_timeout_ms(self._mc(), timeout_ms)

    def set_target_assignment(self, group_id: str,
                              assignment: Mapping[str, Iterable[tuple[str, int]]]) -> None:
        """KIP-848: replace the group's next target assignment (member id -> [(topic,
        partition), ...]) instead of the mock's own assignor's result."""
        lib = self._lib
        with self._member_partition_lists(assignment) as (ids, lists):
            target = lib.rd_kafka_mock_cgrp_consumer_target_assignment_new(
                ids, len(ids), lists)
            if not target:
                raise MockClusterError("target_assignment_new failed")
            try:
                lib.rd_kafka_mock_cgrp_consumer_target_assignment(
                    self._mc(), group_id.encode(), target)
            finally:
                lib.rd_kafka_mock_cgrp_consumer_target_assignment_destroy(target)

    @contextlib.contextmanager
    def _member_partition_lists(self, assignment: Mapping[str, Iterable[tuple[str, int]]]) -> Iterator[tuple]:
        """(member id array, partition list array) for the target-assignment calls; both
        librdkafka functions copy the lists, so ours are always ours to free."""
        lib = self._lib
        members = list(assignment)
        ids = (_c_char_p * len(members))(*[m.encode() for m in members])
        lists = (_c_void_p * len(members))()
        try:
            for i, member in enumerate(members):
                parts = list(assignment[member])
                lists[i] = lib.rd_kafka_topic_partition_list_new(max(1, len(parts)))
                for topic, partition in parts:
                    lib.rd_kafka_topic_partition_list_add(lists[i], topic.encode(), partition)
            yield ids, lists
        finally:
            for ptr in lists:
                if ptr:
                    lib.rd_kafka_topic_partition_list_destroy(ptr)

    # --- KIP-932 share groups (settings apply to every share group of the cluster) --------

    def set_sharegroup(self, *, session_timeout_ms: int | None = None, heartbeat_interval_ms: int | None = None,
                       max_delivery_attempts: int | None = None, record_lock_duration_ms: int | None = None,
                       isolation_level: str | None = None, max_size: int | None = None,
                       max_fetch_sessions: int | None = None, max_record_locks: int | None = None,
                       auto_offset_reset: str | None = None) -> None:
        """Share-group settings (``rd_kafka_mock_sharegroup_set_*``); None leaves one as is.
        The mock's defaults: session 45 s, heartbeat 5 s, 5 delivery attempts, 30 s locks,
        read_uncommitted, offset reset ``latest``."""
        lib, mc = self._lib, self._mc()
        ints = (("session_timeout", session_timeout_ms), ("heartbeat_interval", heartbeat_interval_ms),
                ("max_delivery_attempts", max_delivery_attempts), ("record_lock_duration", record_lock_duration_ms),
                ("max_size", max_size), ("max_fetch_sessions", max_fetch_sessions),
                ("max_record_locks", max_record_locks))
        for name, value in ints:
            if value is not None:
                getattr(lib, "rd_kafka_mock_sharegroup_set_" + name)(mc, value)
        if isolation_level is not None:
            lib.rd_kafka_mock_sharegroup_set_isolation_level(
                mc, ("read_uncommitted", "read_committed").index(isolation_level))
        if auto_offset_reset is not None:
            lib.rd_kafka_mock_sharegroup_set_auto_offset_reset(mc, ("latest", "earliest").index(auto_offset_reset))

    def sharegroup_member_ids(self, group_id: str) -> list[str]:
        """The members the mock's share group has now ([] if the group does not exist)."""
        lib = self._lib
        ids = ctypes.POINTER(_c_char_p)()
        cnt = _size_t(0)
        err = lib.rd_kafka_mock_sharegroup_get_member_ids(self._mc(), group_id.encode(), ctypes.byref(ids),
                                                          ctypes.byref(cnt))
        if err:
            return []
        try:
            return [ids[i].decode() for i in range(cnt.value)]
        finally:
            # The strings and the array came from rd_malloc: hand them back to librdkafka.
            char_pp = ctypes.cast(ids, ctypes.POINTER(_c_void_p))
            for i in range(cnt.value):
                lib.rd_kafka_mem_free(None, char_pp[i])
            lib.rd_kafka_mem_free(None, ids)

    def set_sharegroup_target_assignment(self, group_id: str,
                                         assignment: Mapping[str, Iterable[tuple[str, int]]]) -> None:
        """Replace the share group's assignment: member id -> [(topic, partition), ...]."""
        with self._member_partition_lists(assignment) as (ids, lists):
            self._lib.rd_kafka_mock_sharegroup_target_assignment(self._mc(), group_id.encode(), ids, lists, len(ids))

    # --- request tracking --------------------------------------------------------------

    def start_request_tracking(self) -> None:
        self._lib.rd_kafka_mock_start_request_tracking(self._mc())

    def stop_request_tracking(self) -> None:
        """Stop recording. librdkafka 2.16 also forgets what was recorded (its header says
        the record is kept): read :meth:`requests` first."""
        self._lib.rd_kafka_mock_stop_request_tracking(self._mc())

    def clear_requests(self) -> None:
        self._lib.rd_kafka_mock_clear_requests(self._mc())

    def requests(self) -> list[TrackedRequest]:
        """Requests recorded so far, in arrival order."""
        lib = self._lib
        cnt = _size_t(0)
        arr = lib.rd_kafka_mock_get_requests(self._mc(), ctypes.byref(cnt))
        if not arr:
            return []
        try:
            return [TrackedRequest(lib.rd_kafka_mock_request_id(arr[i]),
                                   lib.rd_kafka_mock_request_api_key(arr[i]),
                                   lib.rd_kafka_mock_request_timestamp(arr[i]))
                    for i in range(cnt.value)]
        finally:
            lib.rd_kafka_mock_request_destroy_array(arr, cnt.value)

    def __repr__(self) -> str:
        return "MockCluster({!r}, brokers={})".format(self.bootstrap_servers, self.broker_count)
