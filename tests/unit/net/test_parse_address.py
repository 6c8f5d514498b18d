"""kproto.net.config.parse_address: the one address parser (bootstrap servers and the tools)."""

from __future__ import annotations

import pytest

from kproto.errors import KafkaConfigurationError
from kproto.net.config import parse_address, parse_bootstrap_servers


@pytest.mark.parametrize("text, kwargs, expected", [
    ("broker:9092", {}, ("broker", 9092)),
    (" 127.0.0.1:19092 ", {}, ("127.0.0.1", 19092)),
    ("[::1]:9093", {}, ("::1", 9093)),
    ("broker", {"default_port": 9092}, ("broker", 9092)),
    ("::1", {"default_port": 9092}, ("::1", 9092)),
    ("[::1]", {"default_port": 9092}, ("::1", 9092)),
    ("9094", {"default_host": "127.0.0.1"}, ("127.0.0.1", 9094)),
    (":9094", {"default_host": "127.0.0.1"}, ("127.0.0.1", 9094)),
    ("127.0.0.1:0", {}, ("127.0.0.1", 0)),  # a port the OS picks (trace --listen)
])
def test_addresses(text, kwargs, expected):
    assert parse_address(text, **kwargs) == expected


@pytest.mark.parametrize("text, kwargs", [
    ("broker", {}), ("9094", {}), ("broker:", {}), ("broker:http", {}), (":9092", {}),
    ("broker:65536", {}), ("[::1]:x", {}), ("", {"default_port": 9092}),
])
def test_what_is_not_an_address_is_named(text, kwargs):
    with pytest.raises(KafkaConfigurationError, match="not a HOST:PORT address"):
        parse_address(text, **kwargs)


def test_bootstrap_servers_default_the_port_and_name_a_bad_entry():
    assert parse_bootstrap_servers("a:1,b, [::1]:3") == [("a", 1), ("b", 9092), ("::1", 3)]
    with pytest.raises(KafkaConfigurationError, match="bad bootstrap server 'b:x'"):
        parse_bootstrap_servers("a:1,b:x")
    with pytest.raises(KafkaConfigurationError, match="empty"):
        parse_bootstrap_servers(" , ")
