"""The Kafka error-code table in kproto.errors: completeness, kafka-python names, kinds."""

import ast
import inspect
from pathlib import Path

import pytest

from kproto import errors
from kproto.errors import ErrorCode


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
    for code in ErrorCode:
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


def test_every_hand_written_class_is_public_from_kproto_errors():
    # kproto.errors re-exports its hand-written half through base.__all__: a class added to
    # the base but not to __all__ would be missing from the public home.
    from kproto.errors import base
    defined = {name for name, obj in vars(base).items()
               if inspect.isclass(obj) and issubclass(obj, errors.KafkaError)}
    assert defined <= set(base.__all__)
    for name in defined:
        assert getattr(errors, name) is getattr(base, name)
        assert getattr(errors, name).__module__ == "kproto.errors"


def test_every_code_kafka_4_4_defines_is_an_error_code_member_with_its_own_class():
    # Kafka 4.4's Errors enum is contiguous from -1 to 136 (GROUP_DELETION_FAILED 134,
    # STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED 135, CONTROLLER_ID_NOT_REGISTERED 136 new).
    assert [int(code) for code in ErrorCode] == list(range(-1, 137))
    classes = {errors.for_code(code) for code in ErrorCode}
    assert len(classes) == len(ErrorCode)
    assert ErrorCode.GROUP_DELETION_FAILED == 134
    assert errors.for_code(135) is errors.StreamsTopologyDescriptionUpdateFailedError
    assert errors.ControllerIdNotRegisteredError.errno == 136


def test_error_code_and_classes_agree_and_round_trip():
    for code in ErrorCode:
        cls = errors.for_code(code)
        assert cls.errno == code and ErrorCode(cls.errno) is code
        assert cls.message == code.name
        assert ErrorCode[cls.message] is code
        assert issubclass(cls, errors.BrokerResponseError)
        assert getattr(errors, cls.__name__) is cls
        assert cls.__module__ == "kproto.errors"
    # IntEnum members compare equal to the plain int16 a decoded response carries.
    assert ErrorCode.NOT_COORDINATOR == 16 and 16 in {ErrorCode.NOT_COORDINATOR}
    assert ErrorCode.MESSAGE_TOO_LARGE == errors.MessageSizeTooLargeError.errno


def test_every_code_class_is_declared_statically_for_type_checkers():
    # A class made with type() at import time is invisible to mypy; each must be a class
    # statement in the generated module (or an alias of one).
    path = Path(errors.__file__).with_name("codes.py")
    declared = {node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.ClassDef)}
    for code in ErrorCode:
        assert errors.for_code(code).__name__ in declared, code
    assert "ErrorCode" in declared


@pytest.mark.parametrize("code,retriable,invalid_metadata", [
    (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, True, False), (ErrorCode.SHARE_SESSION_NOT_FOUND, True, False),
    (ErrorCode.SHARE_SESSION_LIMIT_REACHED, True, False), (ErrorCode.REBOOTSTRAP_REQUIRED, False, False),
    (ErrorCode.GROUP_DELETION_FAILED, False, False), (ErrorCode.CONTROLLER_ID_NOT_REGISTERED, False, False),
    (ErrorCode.KAFKA_STORAGE_ERROR, True, True), (ErrorCode.UNKNOWN_TOPIC_ID, True, True),
    (ErrorCode.UNKNOWN_SERVER_ERROR, False, False),
])
def test_flags_of_newer_codes_follow_the_java_hierarchy(code, retriable, invalid_metadata):
    cls = errors.for_code(code)
    assert (cls.retriable, cls.invalid_metadata) == (retriable, invalid_metadata)


def test_sasl_codes_are_authentication_errors():
    for code in (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ErrorCode.ILLEGAL_SASL_STATE):
        assert issubclass(errors.for_code(code), errors.AuthenticationError)
        assert not issubclass(errors.for_code(code), errors.SaslAuthenticationError)
    assert issubclass(errors.for_code(ErrorCode.SASL_AUTHENTICATION_FAILED), errors.SaslAuthenticationError)
    assert not issubclass(errors.for_code(ErrorCode.NOT_COORDINATOR), errors.AuthenticationError)
