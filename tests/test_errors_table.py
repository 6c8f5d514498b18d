"""The Kafka error-code table in kproto.errors: completeness, kafka-python names, kinds."""

import inspect

import pytest

from kproto import errors


def _kafka_python_errors():
    kerrors = pytest.importorskip("kafka.errors")
    return {name: cls for name, cls in vars(kerrors).items()
            if inspect.isclass(cls) and issubclass(cls, kerrors.BrokerResponseError)
            and cls.errno is not None}


def test_every_code_kafka_4_0_defines_has_its_own_class():
    # Kafka 4.0's Errors enum is contiguous from -1 (UNKNOWN_SERVER_ERROR) to 129.
    seen = set()
    for code in range(-1, 130):
        cls = errors.for_code(code)
        assert cls.errno == code
        assert not cls.__name__.startswith("UnknownError") or code == -1, code
        assert cls.message and cls.message.isupper()
        assert cls.description.endswith(".")
        seen.add(cls)
    assert len(seen) == 131


def test_kafka_python_class_names_map_to_the_same_codes():
    for name, kcls in _kafka_python_errors().items():
        ours = getattr(errors, name, None)
        assert ours is not None, name
        # kproto's CorruptRecordError is the client-side corruption error; the broker's
        # code 2 class derives from it, so `except CorruptRecordError` still catches it.
        assert issubclass(errors.for_code(kcls.errno), ours), name


def test_java_style_aliases_name_the_same_class():
    assert errors.NotLeaderOrFollowerError is errors.NotLeaderForPartitionError
    assert errors.NotLeaderOrFollowerError.errno == 6
    assert errors.NotLeaderOrFollowerError.message == "NOT_LEADER_OR_FOLLOWER"
    assert errors.UnknownServerError is errors.UnknownError
    assert errors.InvalidConfigError is errors.InvalidConfigurationError
    assert errors.IncompatibleBrokerVersion is errors.UnsupportedVersionError


@pytest.mark.parametrize("code,retriable,invalid_metadata", [
    (1, False, False), (3, True, True), (6, True, True), (7, True, False), (8, False, False),
    (14, True, False), (16, True, False), (27, False, False), (35, False, False),
    (74, True, True), (100, True, True), (110, False, False), (129, False, False),
])
def test_retriable_and_invalid_metadata_flags_follow_the_java_hierarchy(code, retriable,
                                                                      invalid_metadata):
    cls = errors.for_code(code)
    assert cls.retriable is retriable
    assert cls.invalid_metadata is invalid_metadata
    assert issubclass(cls, errors.RetriableError) is retriable
    assert issubclass(cls, errors.InvalidMetadataError) is invalid_metadata


def test_flags_and_bases_agree_for_every_code():
    for code in range(0, 134):
        cls = errors.for_code(code)
        assert issubclass(cls, errors.RetriableError) == cls.retriable, cls
        if cls.invalid_metadata:
            assert cls.retriable, cls


def test_broker_corrupt_message_is_also_a_corrupt_record_error():
    cls = errors.for_code(2)
    assert issubclass(cls, errors.CorruptRecordError)
    with pytest.raises(errors.CorruptRecordError) as info:
        raise cls("crc mismatch")
    assert "[Error 2]" in str(info.value)


def test_error_for_builds_an_instance_with_the_broker_text():
    assert errors.error_for(0) is None
    err = errors.error_for(25, "member gone")
    assert isinstance(err, errors.UnknownMemberIdError)
    assert str(err) == "[Error 25] UnknownMemberIdError: member gone"
    assert str(errors.error_for(25)) == "[Error 25] UnknownMemberIdError"


def test_unknown_code_is_an_unknown_error_subclass_that_keeps_its_code():
    cls = errors.for_code(-9999)
    assert issubclass(cls, errors.UnknownError)
    assert cls.errno == -9999
    assert not cls.retriable


def test_client_side_errors_have_their_kinds():
    assert issubclass(errors.KafkaConnectionError, errors.InvalidMetadataError)
    assert issubclass(errors.RequestTimeoutError, errors.KafkaTimeoutError)
    assert errors.KafkaTimeoutError.retriable
    assert errors.NoBrokersAvailable.retriable
    assert issubclass(errors.CorrelationIdError, errors.KafkaProtocolError)
    assert not errors.ProtocolError.retriable
    assert issubclass(errors.KafkaConfigurationError, ValueError)
