"""Findings and reproducer files: what a finding holds and how it is written and read.

Owns :class:`Finding` (API, version, oracle, signature, the exact bytes that fire it, the
decoded request tree, a sequence's frames and what their answers issued, the broker's
ApiVersions and the seed) with its de-duplication key, and the reproducer file format in
``--out DIR`` (JSON: bytes as hex and base64, the tree with bytes as hex; files without
the newer optional keys still load) that ``python -m kproto fuzz replay FILE`` reads back.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

FORMAT = "kproto-fuzz-reproducer/1"


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"hex": bytes(value).hex()}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value != value:
        return "NaN"
    return value


def _issued_value(value: Any) -> Any:
    """An issued value in JSON: a uuid as {"uuid": text} (threading compares values by type
    too), ints and strings as they are."""
    return {"uuid": str(value)} if isinstance(value, uuid.UUID) else value


def _issued_value_of(value: Any) -> Any:
    return uuid.UUID(value["uuid"]) if isinstance(value, dict) else value


def request_tree(request: Any) -> Optional[dict[str, Any]]:
    """The request's field tree, JSON-ready (bytes as {"hex": ...}, uuids as text)."""
    return None if request is None else _plain(request.to_dict())


def header_of(wire: bytes) -> dict[str, Any]:
    """What the frame's first bytes say (size prefix, API key, version, correlation id)."""
    out: dict[str, Any] = {}
    if len(wire) >= 4:
        out["size"] = struct.unpack_from(">i", wire)[0]
    if len(wire) >= 8:
        out["api_key"], out["api_version"] = struct.unpack_from(">hh", wire, 4)
    if len(wire) >= 12:
        out["correlation_id"] = struct.unpack_from(">i", wire, 8)[0]
    return out


@dataclass
class Finding:
    api: str
    api_key: int
    version: int                     # the version of the reproducer's bytes
    oracle: str
    signature: str
    message: str
    strategy: str
    level: str                       # valid, field, frame, sequence
    wire: bytes                      # the bytes that fire it (minimised when possible)
    valid: bool
    note: str = ""
    request: Optional[dict[str, Any]] = None
    steps: list[bytes] = field(default_factory=list)   # a sequence's frames, in order
    # A replayed sequence seed's: per step, what its answer issued ((field name, value), in
    # order), so that replay threads this broker's values through (empty: not threaded)
    issued: list[list[tuple[str, Any]]] = field(default_factory=list)
    response: Optional[bytes] = None
    seed: Optional[int] = None
    sequence_seed: Optional[int] = None
    iteration: int = 0
    found_after_s: float = 0.0
    count: int = 1
    original_size: int = 0
    minimised: Optional[dict[str, Any]] = None
    extra: dict[str, Any] = field(default_factory=dict)
    broker_api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    replay: Optional[str] = None
    file: Optional[str] = None
    versions: list[int] = field(default_factory=list)  # every version it fired on

    def __post_init__(self) -> None:
        if self.version not in self.versions:
            self.versions = sorted(set(self.versions) | {self.version})

    @property
    def key(self) -> tuple[str, str, str]:
        """One bug, whatever the version: an API family, an oracle and a signature (the
        versions it fired on are listed in ``versions``)."""
        return (self.api, self.oracle, self.signature)

    @property
    def version_text(self) -> str:
        return version_ranges(self.versions)

    @property
    def ident(self) -> str:
        return hashlib.sha1(repr(self.key).encode()).hexdigest()[:10]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("wire", "response"):
            raw = getattr(self, name)
            out[name] = None if raw is None else {
                "hex": raw.hex(), "base64": base64.b64encode(raw).decode()}
        out["steps"] = [s.hex() for s in self.steps]
        out["issued"] = [[[name, _issued_value(v)] for name, v in step] for step in self.issued]
        out["header"] = header_of(self.wire)
        out["request"] = self.request
        out["broker_api_versions"] = {str(k): "{}-{}".format(*v)
                                      for k, v in sorted(self.broker_api_versions.items())}
        out["format"] = FORMAT
        out["id"] = self.ident
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Finding":
        if data.get("format") != FORMAT:
            raise ValueError("not a kproto fuzz reproducer (format {!r})".format(
                data.get("format")))
        known = set(cls.__dataclass_fields__)
        kw = {k: v for k, v in data.items() if k in known}
        kw["wire"] = bytes.fromhex(data["wire"]["hex"])
        kw["response"] = (None if data.get("response") is None
                          else bytes.fromhex(data["response"]["hex"]))
        kw["steps"] = [bytes.fromhex(s) for s in data.get("steps", [])]
        kw["issued"] = [[(name, _issued_value_of(v)) for name, v in step]
                        for step in data.get("issued", [])]
        kw["broker_api_versions"] = {int(k): tuple(int(x) for x in v.split("-"))
                                     for k, v in data.get("broker_api_versions", {}).items()}
        return cls(**kw)


def version_ranges(versions: list[int]) -> str:
    """``v1-v4,v7`` for [1, 2, 3, 4, 7]."""
    runs: list[list[int]] = []
    for v in sorted(set(versions)):
        if runs and runs[-1][1] == v - 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ",".join("v{}".format(a) if a == b else "v{}-v{}".format(a, b) for a, b in runs)


def save(finding: Finding, out_dir: Path) -> Path:
    """Write the reproducer ``<api>-<oracle>-<id>.json`` (again when the finding fired on
    another version); returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "{}-{}-{}.json".format(finding.api, finding.oracle, finding.ident)
    finding.file = str(path)
    data = finding.to_json()
    del data["file"]  # where it was written is the report's business, not the reproducer's
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def load(path: Path) -> Finding:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError("cannot read reproducer {}: {}".format(path, exc)) from None
    return Finding.from_json(data)


__all__ = ["Finding", "save", "load", "request_tree", "header_of", "version_ranges", "FORMAT"]
