"""One exception family for kproto.

Owns every exception kproto raises: client-side errors (corrupt bytes, timeouts, bad
configuration, illegal state) and one class per Kafka protocol error code, with the
code, its name, whether it is retriable, and a one-line meaning. Class names follow
kafka-python's ``kafka.errors`` so code written against it keeps catching the same
names. Everything that maps a response's error code to an exception goes through
``for_code``.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Root of every kproto exception."""

    retriable: bool = False
    # Whether the metadata should be refreshed before retrying (as in kafka-python).
    invalid_metadata: bool = False

    def __str__(self) -> str:
        if not self.args:
            return self.__class__.__name__
        return "{}: {}".format(self.__class__.__name__, super().__str__())


class RetriableError(KafkaError):
    """An error after which the same operation may succeed if retried (after a backoff)."""

    retriable = True


class InvalidMetadataError(RetriableError):
    """A retriable error that means the client's cluster metadata is stale: refresh, then retry."""

    invalid_metadata = True


# --- client-side errors --------------------------------------------------------------


class IllegalStateError(KafkaError):
    """The client was used in a way its current state does not allow."""


class IllegalArgumentError(KafkaError, ValueError):
    """An argument (or configuration value) is invalid."""


class KafkaConfigurationError(IllegalArgumentError):
    """Unknown or invalid consumer configuration; raised at construction."""


class CorruptMessageError(KafkaError):
    """Protocol bytes could not be decoded (truncated, garbage, invalid varint, absurd length).

    ``api``/``version``/``offset`` say where decoding failed when known.
    """

    def __init__(self, message: str = "", *, api: str | None = None, version: int | None = None,
                 offset: int | None = None) -> None:
        self.api = api
        self.version = version
        self.offset = offset
        where = []
        if api is not None:
            where.append(api if version is None else "{} v{}".format(api, version))
        if offset is not None:
            where.append("at byte {}".format(offset))
        if where:
            message = "{} ({})".format(message, ", ".join(where)) if message else ", ".join(where)
        super().__init__(message)


class CorruptRecordError(CorruptMessageError):
    """A record batch failed its CRC or could not be decoded."""

    def __init__(self, message: str = "", *, topic: str | None = None, partition: int | None = None,
                 offset: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.record_offset = offset
        where = []
        if topic is not None:
            where.append("{}-{}".format(topic, partition))
        if offset is not None:
            where.append("offset {}".format(offset))
        if where:
            message = "{} ({})".format(message, ", ".join(where))
        KafkaError.__init__(self, message)
        self.api = None
        self.version = None
        self.offset = offset


class UnsupportedCodecError(KafkaError):
    """A batch uses a compression codec that is unknown, or whose optional package is missing."""


class KafkaTimeoutError(RetriableError):
    """An operation did not complete within its timeout."""


class RequestTimeoutError(KafkaTimeoutError):
    """A request got no response within its request timeout; its connection is closed."""


class NoBrokersAvailable(InvalidMetadataError):
    """None of the bootstrap servers could be reached."""


class KafkaConnectionError(InvalidMetadataError):
    """A connection failed or was closed; requests in flight on it fail with this."""


class NodeNotReadyError(RetriableError):
    """The connection to the node is not established (or not yet negotiated)."""


class TooManyInFlightRequests(RetriableError):
    """The connection already has ``max_in_flight_requests_per_connection`` requests out."""


class StaleMetadata(InvalidMetadataError):
    """The cluster metadata does not (yet) know what was asked for."""


class UnknownBrokerIdError(KafkaError):
    """A node id that the cluster metadata does not know."""


class Cancelled(RetriableError):
    """The request was abandoned before its response arrived (client closed)."""


class ProtocolError(KafkaError):
    """The peer broke the protocol (e.g. a response with an unexpected correlation id)."""


class CorrelationIdError(ProtocolError):
    """A response's correlation id is not the one of the oldest request in flight."""


class InvalidReceiveError(ProtocolError):
    """A frame's size prefix is negative or over ``receive_message_max_bytes``."""


class UnrecognizedBrokerVersion(KafkaError):
    """The broker supports no version of an API the client needs."""


# kafka-python's name for ProtocolError.
KafkaProtocolError = ProtocolError


class ConcurrentModificationError(KafkaError):
    """A KafkaConsumer was called from a second thread (only ``wakeup()`` is allowed)."""


class WakeupException(KafkaError):
    """A blocking call was interrupted by ``KafkaConsumer.wakeup()``."""


class AuthenticationError(KafkaError):
    """Authentication with a broker failed (Java's ``AuthenticationException``).

    Never retriable: the consumer raises it from ``poll()`` and blocking calls instead of
    reconnecting with backoff forever. Broker codes 33, 34 and 58 derive from it.
    """


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication failed: bad credentials, a server signature that does not
    verify, a malformed server message, or the broker closing the connection during the
    exchange (Java's ``SaslAuthenticationException``)."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake with a broker failed: its certificate did not verify (unknown CA,
    expired, host name mismatch), or it refused ours with an alert, which TLS 1.3 delivers
    at the first read after the handshake (Java's ``SslAuthenticationException``). A TCP
    refusal, or a connection closed before any TLS record, stays a retriable
    ``KafkaConnectionError``."""


class CommitFailedError(KafkaError):
    """A commit cannot be completed because the group rebalanced or the member was fenced."""


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto_offset_reset='none'``."""


class LogTruncationError(KafkaError):
    """The log was truncated below the consumer's position (detected by OffsetForLeaderEpoch)."""

    def __init__(self, message: str = "", divergent_offsets: dict | None = None) -> None:
        super().__init__(message)
        self.divergent_offsets = dict(divergent_offsets or {})


class RecordTooLargeError(KafkaError):
    """A record batch is larger than the fetch size; raise ``max_partition_fetch_bytes``."""


class RecordDeserializationError(KafkaError):
    """A key or value deserializer failed; seek past ``offset`` to continue."""

    def __init__(self, message: str, topic_partition: object = None, offset: int = -1) -> None:
        super().__init__(message)
        self.topic_partition = topic_partition
        self.offset = offset


# --- broker error codes --------------------------------------------------------------


class BrokerResponseError(KafkaError):
    """A Kafka error code returned by a broker. Subclasses set ``errno``/``message``.

    ``message`` is the code's name in Kafka's ``Errors`` enum (kafka-python keeps the
    name in the same attribute); ``description`` a one-line meaning.
    """

    errno: int = -1
    message: str = "UNKNOWN"
    description: str = ""

    def __str__(self) -> str:
        extra = super().__str__().split(": ", 1)
        detail = extra[1] if len(extra) > 1 else ""
        text = "[Error {}] {}".format(self.errno, self.__class__.__name__)
        return text + (": " + detail if detail else "")


_BY_CODE: dict[int, type[BrokerResponseError]] = {}


def _register(cls: type[BrokerResponseError]) -> type[BrokerResponseError]:
    _BY_CODE[cls.errno] = cls
    return cls


def for_code(code: int) -> type[BrokerResponseError]:
    """The exception class for a Kafka error code (an ``UnknownError`` subclass if unknown).

    The one place a response's error code becomes an exception class; ``NoError`` for 0.
    """
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = type("UnknownError{}".format(code), (UnknownError,), {"errno": code})
        _BY_CODE[code] = cls
    return cls


def error_for(code: int, detail: str | None = None) -> BrokerResponseError | None:
    """An exception instance for a non-zero error code (None for 0), with the broker's text."""
    if code == 0:
        return None
    cls = for_code(code)
    return cls(detail) if detail else cls()


@_register
class UnknownError(BrokerResponseError):
    errno = -1
    message = "UNKNOWN_SERVER_ERROR"
    description = "The server experienced an unexpected error when processing the request."


# The error-code table of Kafka 4.0 (clients' ``org.apache.kafka.common.protocol.Errors``),
# plus 130-133 that Kafka 4.1 added. Columns: code, class name as kafka-python's
# ``kafka.errors`` spells it, the enum name, flags, and a one-line meaning.
# Flags: "R" retriable (the Java exception is a RetriableException), "M" also an
# InvalidMetadataException (refresh metadata before retrying; implies retriable).
_TABLE: tuple[tuple[int, str, str, str, str], ...] = (
    (0, "NoError", "NONE", "", "No error."),
    (1, "OffsetOutOfRangeError", "OFFSET_OUT_OF_RANGE", "",
     "The requested offset is outside the range the broker has for the partition."),
    (2, "CorruptRecordException", "CORRUPT_MESSAGE", "R",
     "A message failed its CRC, has an invalid size, or is otherwise corrupt."),
    (3, "UnknownTopicOrPartitionError", "UNKNOWN_TOPIC_OR_PARTITION", "M",
     "This broker does not host the topic-partition."),
    (4, "InvalidFetchRequestError", "INVALID_FETCH_SIZE", "", "The requested fetch size is invalid."),
    (5, "LeaderNotAvailableError", "LEADER_NOT_AVAILABLE", "M",
     "The partition has no leader right now (an election is under way)."),
    (6, "NotLeaderForPartitionError", "NOT_LEADER_OR_FOLLOWER", "M",
     "This broker is neither leader nor follower of the partition: metadata is stale."),
    (7, "RequestTimedOutError", "REQUEST_TIMED_OUT", "R", "The request timed out on the broker."),
    (8, "BrokerNotAvailableError", "BROKER_NOT_AVAILABLE", "", "The broker is not available."),
    (9, "ReplicaNotAvailableError", "REPLICA_NOT_AVAILABLE", "M",
     "The replica is not available for the partition."),
    (10, "MessageSizeTooLargeError", "MESSAGE_SIZE_TOO_LARGE", "",
     "The request included a message larger than the broker accepts."),
    (11, "StaleControllerEpochError", "STALE_CONTROLLER_EPOCH", "",
     "The controller moved to another broker."),
    (12, "OffsetMetadataTooLargeError", "OFFSET_METADATA_TOO_LARGE", "",
     "The metadata string of an offset commit is too large."),
    (13, "NetworkExceptionError", "NETWORK_EXCEPTION", "M",
     "The server disconnected before a response was received."),
    (14, "CoordinatorLoadInProgressError", "COORDINATOR_LOAD_IN_PROGRESS", "R",
     "The coordinator is still loading its state for the group."),
    (15, "CoordinatorNotAvailableError", "COORDINATOR_NOT_AVAILABLE", "R",
     "The coordinator is not available."),
    (16, "NotCoordinatorError", "NOT_COORDINATOR", "R", "This broker is not the group's coordinator."),
    (17, "InvalidTopicError", "INVALID_TOPIC_EXCEPTION", "",
     "The topic name is invalid, or an internal topic was written to."),
    (18, "RecordListTooLargeError", "RECORD_LIST_TOO_LARGE", "",
     "A produced batch is larger than the segment size."),
    (19, "NotEnoughReplicasError", "NOT_ENOUGH_REPLICAS", "R",
     "Fewer in-sync replicas than required."),
    (20, "NotEnoughReplicasAfterAppendError", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "R",
     "Written, but to fewer in-sync replicas than required."),
    (21, "InvalidRequiredAcksError", "INVALID_REQUIRED_ACKS", "", "The produce acks value is invalid."),
    (22, "IllegalGenerationError", "ILLEGAL_GENERATION", "",
     "The group generation id given is not the current one."),
    (23, "InconsistentGroupProtocolError", "INCONSISTENT_GROUP_PROTOCOL", "",
     "The member's protocol type or protocols do not match the group's."),
    (24, "InvalidGroupIdError", "INVALID_GROUP_ID", "", "The group id is empty or invalid."),
    (25, "UnknownMemberIdError", "UNKNOWN_MEMBER_ID", "",
     "The coordinator does not know this member id."),
    (26, "InvalidSessionTimeoutError", "INVALID_SESSION_TIMEOUT", "",
     "The session timeout is outside the broker's allowed range."),
    (27, "RebalanceInProgressError", "REBALANCE_IN_PROGRESS", "",
     "The group is rebalancing; the member must rejoin."),
    (28, "InvalidCommitOffsetSizeError", "INVALID_COMMIT_OFFSET_SIZE", "",
     "The committed offset's metadata is too large."),
    (29, "TopicAuthorizationFailedError", "TOPIC_AUTHORIZATION_FAILED", "",
     "Not authorized to access the topic."),
    (30, "GroupAuthorizationFailedError", "GROUP_AUTHORIZATION_FAILED", "",
     "Not authorized to access the group."),
    (31, "ClusterAuthorizationFailedError", "CLUSTER_AUTHORIZATION_FAILED", "",
     "Not authorized for this cluster-level action."),
    (32, "InvalidTimestampError", "INVALID_TIMESTAMP", "",
     "A message timestamp is outside the accepted range."),
    (33, "UnsupportedSaslMechanismError", "UNSUPPORTED_SASL_MECHANISM", "",
     "The broker does not support the SASL mechanism."),
    (34, "IllegalSaslStateError", "ILLEGAL_SASL_STATE", "",
     "The request is not valid in the SASL handshake's current state."),
    (35, "UnsupportedVersionError", "UNSUPPORTED_VERSION", "",
     "The broker does not support this API version."),
    (36, "TopicAlreadyExistsError", "TOPIC_ALREADY_EXISTS", "", "The topic already exists."),
    (37, "InvalidPartitionsError", "INVALID_PARTITIONS", "", "The number of partitions is invalid."),
    (38, "InvalidReplicationFactorError", "INVALID_REPLICATION_FACTOR", "",
     "The replication factor is invalid."),
    (39, "InvalidReplicationAssignmentError", "INVALID_REPLICA_ASSIGNMENT", "",
     "The replica assignment is invalid."),
    (40, "InvalidConfigurationError", "INVALID_CONFIG", "", "A configuration value is invalid."),
    (41, "NotControllerError", "NOT_CONTROLLER", "R", "This broker is not the active controller."),
    (42, "InvalidRequestError", "INVALID_REQUEST", "",
     "The request is malformed or otherwise invalid (see the broker log)."),
    (43, "UnsupportedForMessageFormatError", "UNSUPPORTED_FOR_MESSAGE_FORMAT", "",
     "The topic's message format does not support the request."),
    (44, "PolicyViolationError", "POLICY_VIOLATION", "", "A broker policy rejected the request."),
    (45, "OutOfOrderSequenceNumberError", "OUT_OF_ORDER_SEQUENCE_NUMBER", "",
     "The broker got a producer sequence number out of order."),
    (46, "DuplicateSequenceNumberError", "DUPLICATE_SEQUENCE_NUMBER", "",
     "The broker got a duplicate producer sequence number."),
    (47, "InvalidProducerEpochError", "INVALID_PRODUCER_EPOCH", "",
     "The producer's epoch is older than the current one (it was fenced)."),
    (48, "InvalidTxnStateError", "INVALID_TXN_STATE", "",
     "The operation is not valid in the transaction's current state."),
    (49, "InvalidProducerIdMappingError", "INVALID_PRODUCER_ID_MAPPING", "",
     "The producer id is not the one mapped to the transactional id."),
    (50, "InvalidTransactionTimeoutError", "INVALID_TRANSACTION_TIMEOUT", "",
     "The transaction timeout exceeds the broker's maximum."),
    (51, "ConcurrentTransactionsError", "CONCURRENT_TRANSACTIONS", "R",
     "Another transactional request for this producer is in progress."),
    (52, "TransactionCoordinatorFencedError", "TRANSACTION_COORDINATOR_FENCED", "",
     "A newer transaction coordinator epoch exists."),
    (53, "TransactionalIdAuthorizationFailedError", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "",
     "Not authorized for the transactional id."),
    (54, "SecurityDisabledError", "SECURITY_DISABLED", "", "Security features are disabled."),
    (55, "OperationNotAttemptedError", "OPERATION_NOT_ATTEMPTED", "",
     "The broker did not attempt the operation (another part of the batch failed)."),
    (56, "KafkaStorageError", "KAFKA_STORAGE_ERROR", "M",
     "A disk error on the broker when accessing the log."),
    (57, "LogDirNotFoundError", "LOG_DIR_NOT_FOUND", "", "The log directory is not in the config."),
    (58, "SaslAuthenticationFailedError", "SASL_AUTHENTICATION_FAILED", "",
     "SASL authentication failed."),
    (59, "UnknownProducerIdError", "UNKNOWN_PRODUCER_ID", "",
     "The broker has no state for this producer id."),
    (60, "ReassignmentInProgressError", "REASSIGNMENT_IN_PROGRESS", "",
     "A partition reassignment is in progress."),
    (61, "DelegationTokenAuthDisabledError", "DELEGATION_TOKEN_AUTH_DISABLED", "",
     "Delegation-token authentication is disabled."),
    (62, "DelegationTokenNotFoundError", "DELEGATION_TOKEN_NOT_FOUND", "",
     "The delegation token was not found."),
    (63, "DelegationTokenOwnerMismatchError", "DELEGATION_TOKEN_OWNER_MISMATCH", "",
     "The principal is not the delegation token's owner or renewer."),
    (64, "DelegationTokenRequestNotAllowedError", "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", "",
     "Delegation-token requests are not allowed on this channel."),
    (65, "DelegationTokenAuthorizationFailedError", "DELEGATION_TOKEN_AUTHORIZATION_FAILED", "",
     "Not authorized for the delegation-token action."),
    (66, "DelegationTokenExpiredError", "DELEGATION_TOKEN_EXPIRED", "",
     "The delegation token has expired."),
    (67, "InvalidPrincipalTypeError", "INVALID_PRINCIPAL_TYPE", "",
     "The principal type is not supported."),
    (68, "NonEmptyGroupError", "NON_EMPTY_GROUP", "", "The group is not empty."),
    (69, "GroupIdNotFoundError", "GROUP_ID_NOT_FOUND", "", "The group id does not exist."),
    (70, "FetchSessionIdNotFoundError", "FETCH_SESSION_ID_NOT_FOUND", "R",
     "The incremental fetch session id is unknown to the broker."),
    (71, "InvalidFetchSessionEpochError", "INVALID_FETCH_SESSION_EPOCH", "R",
     "The fetch session epoch is not the one the broker expects."),
    (72, "ListenerNotFoundError", "LISTENER_NOT_FOUND", "M",
     "The partition's leader has no listener of the name this request came on."),
    (73, "TopicDeletionDisabledError", "TOPIC_DELETION_DISABLED", "", "Topic deletion is disabled."),
    (74, "FencedLeaderEpochError", "FENCED_LEADER_EPOCH", "M",
     "The request's leader epoch is older than the broker's."),
    (75, "UnknownLeaderEpochError", "UNKNOWN_LEADER_EPOCH", "M",
     "The request's leader epoch is newer than the broker's."),
    (76, "UnsupportedCompressionTypeError", "UNSUPPORTED_COMPRESSION_TYPE", "",
     "The requester's version does not support the topic's compression type."),
    (77, "StaleBrokerEpochError", "STALE_BROKER_EPOCH", "", "The broker epoch has changed."),
    (78, "OffsetNotAvailableError", "OFFSET_NOT_AVAILABLE", "R",
     "The leader's high watermark has not caught up after an election."),
    (79, "MemberIdRequiredError", "MEMBER_ID_REQUIRED", "",
     "The group member must rejoin with the member id the coordinator just gave it."),
    (80, "PreferredLeaderNotAvailableError", "PREFERRED_LEADER_NOT_AVAILABLE", "M",
     "The preferred leader was not available."),
    (81, "GroupMaxSizeReachedError", "GROUP_MAX_SIZE_REACHED", "",
     "The group has reached its maximum size."),
    (82, "FencedInstanceIdError", "FENCED_INSTANCE_ID", "",
     "Another member with the same group.instance.id fenced this one."),
    (83, "EligibleLeadersNotAvailableError", "ELIGIBLE_LEADERS_NOT_AVAILABLE", "M",
     "No eligible leader for the partition (election will not succeed now)."),
    (84, "ElectionNotNeededError", "ELECTION_NOT_NEEDED", "M",
     "The leader election is not needed for the partition."),
    (85, "NoReassignmentInProgressError", "NO_REASSIGNMENT_IN_PROGRESS", "",
     "No partition reassignment is in progress."),
    (86, "GroupSubscribedToTopicError", "GROUP_SUBSCRIBED_TO_TOPIC", "",
     "Offsets cannot be deleted for a topic the group is subscribed to."),
    (87, "InvalidRecordError", "INVALID_RECORD", "", "The broker rejected a record as invalid."),
    (88, "UnstableOffsetCommitError", "UNSTABLE_OFFSET_COMMIT", "R",
     "Pending transactional offset commits exist for the partition; retry later."),
    (89, "ThrottlingQuotaExceededError", "THROTTLING_QUOTA_EXCEEDED", "R",
     "A throttling quota was exceeded."),
    (90, "ProducerFencedError", "PRODUCER_FENCED", "",
     "A producer with the same transactional id and a newer epoch exists."),
    (91, "ResourceNotFoundError", "RESOURCE_NOT_FOUND", "", "The resource does not exist."),
    (92, "DuplicateResourceError", "DUPLICATE_RESOURCE", "", "The resource is named twice."),
    (93, "UnacceptableCredentialError", "UNACCEPTABLE_CREDENTIAL", "",
     "The requested credential does not meet the criteria."),
    (94, "InconsistentVoterSetError", "INCONSISTENT_VOTER_SET", "",
     "The voter is not part of the quorum's voter set."),
    (95, "InvalidUpdateVersionError", "INVALID_UPDATE_VERSION", "",
     "The given update version is invalid."),
    (96, "FeatureUpdateFailedError", "FEATURE_UPDATE_FAILED", "",
     "The feature update could not be applied."),
    (97, "PrincipalDeserializationFailureError", "PRINCIPAL_DESERIALIZATION_FAILURE", "",
     "The forwarded request's principal could not be deserialized."),
    (98, "SnapshotNotFoundError", "SNAPSHOT_NOT_FOUND", "", "The snapshot does not exist."),
    (99, "PositionOutOfRangeError", "POSITION_OUT_OF_RANGE", "",
     "The requested snapshot position is out of range."),
    (100, "UnknownTopicIdError", "UNKNOWN_TOPIC_ID", "M", "This broker does not know the topic id."),
    (101, "DuplicateBrokerRegistrationError", "DUPLICATE_BROKER_REGISTRATION", "",
     "The broker's registration duplicates an existing one."),
    (102, "BrokerIdNotRegisteredError", "BROKER_ID_NOT_REGISTERED", "",
     "The broker id is not registered."),
    (103, "InconsistentTopicIdError", "INCONSISTENT_TOPIC_ID", "M",
     "The topic id does not match the one in the log."),
    (104, "InconsistentClusterIdError", "INCONSISTENT_CLUSTER_ID", "",
     "The cluster id does not match the one stored."),
    (105, "TransactionalIdNotFoundError", "TRANSACTIONAL_ID_NOT_FOUND", "",
     "The transactional id does not exist."),
    (106, "FetchSessionTopicIdError", "FETCH_SESSION_TOPIC_ID_ERROR", "R",
     "The fetch session's topic ids changed between requests."),
    (107, "IneligibleReplicaError", "INELIGIBLE_REPLICA", "",
     "The new ISR contains at least one ineligible replica."),
    (108, "NewLeaderElectedError", "NEW_LEADER_ELECTED", "",
     "A new leader was elected; the AlterPartition request was not applied."),
    (109, "OffsetMovedToTieredStorageError", "OFFSET_MOVED_TO_TIERED_STORAGE", "",
     "The requested offset has moved to tiered storage."),
    (110, "FencedMemberEpochError", "FENCED_MEMBER_EPOCH", "",
     "The member epoch is fenced; the member must rejoin with epoch 0."),
    (111, "UnreleasedInstanceIdError", "UNRELEASED_INSTANCE_ID", "",
     "The instance id is still held by another member of the group."),
    (112, "UnsupportedAssignorError", "UNSUPPORTED_ASSIGNOR", "",
     "The group does not support the assignor (or its version range)."),
    (113, "StaleMemberEpochError", "STALE_MEMBER_EPOCH", "",
     "The member epoch is stale; retry after the next heartbeat gives the new one."),
    (114, "MismatchedEndpointTypeError", "MISMATCHED_ENDPOINT_TYPE", "",
     "The request went to an endpoint of the wrong type."),
    (115, "UnsupportedEndpointTypeError", "UNSUPPORTED_ENDPOINT_TYPE", "",
     "This endpoint type is not supported yet."),
    (116, "UnknownControllerIdError", "UNKNOWN_CONTROLLER_ID", "", "The controller id is unknown."),
    (117, "UnknownSubscriptionIdError", "UNKNOWN_SUBSCRIPTION_ID", "",
     "A telemetry push used an unknown or outdated subscription id."),
    (118, "TelemetryTooLargeError", "TELEMETRY_TOO_LARGE", "",
     "A telemetry push was larger than the broker accepts."),
    (119, "InvalidRegistrationError", "INVALID_REGISTRATION", "",
     "The controller considers the broker registration invalid."),
    (120, "TransactionAbortableError", "TRANSACTION_ABORTABLE", "",
     "The transaction failed; the client may abort it and go on."),
    (121, "InvalidRecordStateError", "INVALID_RECORD_STATE", "",
     "The record state is invalid; the acknowledgement failed."),
    (122, "ShareSessionNotFoundError", "SHARE_SESSION_NOT_FOUND", "R",
     "The share session does not exist."),
    (123, "InvalidShareSessionEpochError", "INVALID_SHARE_SESSION_EPOCH", "R",
     "The share session epoch is invalid."),
    (124, "FencedStateEpochError", "FENCED_STATE_EPOCH", "",
     "The share-group state epoch did not match."),
    (125, "InvalidVoterKeyError", "INVALID_VOTER_KEY", "",
     "The voter key does not match the receiving replica's key."),
    (126, "DuplicateVoterError", "DUPLICATE_VOTER", "", "The voter is already in the voter set."),
    (127, "VoterNotFoundError", "VOTER_NOT_FOUND", "", "The voter is not in the voter set."),
    (128, "InvalidRegularExpressionError", "INVALID_REGULAR_EXPRESSION", "",
     "The subscription's regular expression is invalid."),
    (129, "RebootstrapRequiredError", "REBOOTSTRAP_REQUIRED", "",
     "Client metadata is stale; the client should re-bootstrap."),
    (130, "StreamsInvalidTopologyError", "STREAMS_INVALID_TOPOLOGY", "",
     "The streams topology is invalid (Kafka 4.1)."),
    (131, "StreamsInvalidTopologyEpochError", "STREAMS_INVALID_TOPOLOGY_EPOCH", "",
     "The streams topology epoch is invalid (Kafka 4.1)."),
    (132, "StreamsTopologyFencedError", "STREAMS_TOPOLOGY_FENCED", "",
     "The streams topology epoch is outdated (Kafka 4.1)."),
    (133, "ShareSessionLimitReachedError", "SHARE_SESSION_LIMIT_REACHED", "R",
     "The broker's limit of share sessions was reached (Kafka 4.1)."),
)


def _java_style_name(enum_name: str) -> str:
    """``NOT_LEADER_OR_FOLLOWER`` -> ``NotLeaderOrFollowerError`` (the alias spelling)."""
    camel = "".join(part.capitalize() for part in enum_name.split("_"))
    for suffix in ("Exception", "Error"):
        if camel.endswith(suffix):
            camel = camel[: -len(suffix)]
    return camel + "Error"


def _build_table() -> None:
    # One class per code, created from the table so the facts live in one readable place;
    # retriable codes also derive from RetriableError / InvalidMetadataError so callers can
    # catch them by kind.
    namespace = globals()
    for code, name, enum_name, flags, meaning in _TABLE:
        bases: tuple[type, ...] = (BrokerResponseError,)
        if "M" in flags:
            bases += (InvalidMetadataError,)
        elif "R" in flags:
            bases += (RetriableError,)
        if code in (33, 34):
            bases += (AuthenticationError,)
        elif code == 58:
            # SASL_AUTHENTICATION_FAILED is caught as SaslAuthenticationError however it
            # was detected (the broker's answer or the client's own checks).
            bases += (SaslAuthenticationError,)
        if code == 2:
            # The broker's CORRUPT_MESSAGE is also a CorruptRecordError for callers that
            # catch corruption however it was detected.
            bases += (CorruptRecordError,)
        attrs = {"errno": code, "message": enum_name, "description": meaning, "__doc__": meaning,
                 "retriable": bool(flags), "invalid_metadata": "M" in flags,
                 "__module__": __name__}
        cls = type(name, bases, attrs)
        namespace[name] = _register(cls)
        alias = _java_style_name(enum_name)
        if code != 0 and alias not in namespace:
            namespace[alias] = cls


_build_table()

# kafka-python's other spellings.
IncompatibleBrokerVersion = _BY_CODE[35]
UnknownServerError = UnknownError
