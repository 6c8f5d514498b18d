"""TLS for broker connections, with the standard ``ssl`` module; the security protocols.

Owns turning the ``security_protocol``/``ssl_*`` settings into an ``ssl.SSLContext``.
Verification is on by default (the system trust store, or ``ssl_cafile``), and so is
host-name checking; ``ssl_check_hostname=False`` turns off only the host-name check, the
certificate chain is still verified. A ready ``ssl_context`` is used as given.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from kproto import errors

if TYPE_CHECKING:
    from kproto.net.config import NetworkClientConfig

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# The protocols that authenticate with SASL (kproto.net.sasl) after ApiVersions.
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


def build_ssl_context(config: NetworkClientConfig) -> ssl.SSLContext | None:
    """The context for ``security_protocol`` SSL or SASL_SSL (None for (SASL_)PLAINTEXT)."""
    protocol = str(config.security_protocol).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise errors.KafkaConfigurationError(
            "security_protocol {!r} is not supported (one of {})".format(
                protocol, ", ".join(SECURITY_PROTOCOLS)))
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        return None
    given = config.ssl_context
    if given is not None:
        return given
    try:
        context = ssl.create_default_context(cafile=config.ssl_cafile)
        context.check_hostname = bool(config.ssl_check_hostname)
        if config.ssl_certfile:
            context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile, config.ssl_password)
        if config.ssl_crlfile:
            context.load_verify_locations(config.ssl_crlfile)
            context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
        if config.ssl_ciphers:
            context.set_ciphers(config.ssl_ciphers)
    except (OSError, ssl.SSLError) as exc:
        raise errors.KafkaConfigurationError("invalid TLS settings: {}".format(exc)) from exc
    return context
