"""Self-signed certificates for the TLS tests (openssl)."""

from __future__ import annotations

import subprocess


def make_cert(directory, name: str, san: str) -> tuple[str, str]:
    cert, key = str(directory / (name + ".pem")), str(directory / (name + ".key"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=" + name,
                    "-addext", "subjectAltName=" + san],
                   check=True, capture_output=True, timeout=60)
    return cert, key
