"""Run-time view of the generated schema table (``kproto.messages._schema``) for the fuzzer.

Owns the questions the generator, the layout walker and the mutators ask about a message:
which fields a version carries, their types, whether they are nullable or tagged there,
whether the version is flexible, which class builds a struct, and which header versions a
request/response uses. Nothing here encodes bytes.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

from kproto.messages import _schema

Range = tuple[int, Optional[int]]


def in_range(version: int, rng: Range) -> bool:
    lo, hi = rng
    return lo <= version and (hi is None or version <= hi)


@dataclass(frozen=True)
class FieldSpec:
    """One field of a struct, as the schema states it."""

    attr: str
    type: str
    versions: Range
    nullable: Range
    tagged: Range
    tag: Optional[int]
    flexible: Optional[Range]
    struct: Optional[str]  # class name of the element/struct type

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def base_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    def present(self, version: int) -> bool:
        return in_range(version, self.versions)

    def nullable_in(self, version: int) -> bool:
        return in_range(version, self.nullable)

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and in_range(version, self.tagged)


@dataclass(frozen=True)
class ApiSpec:
    """A request message of one API key."""

    name: str          # FetchRequest
    api_key: int
    min_version: int
    max_version: int
    flexible: Range
    module: str
    root: str

    @property
    def api_name(self) -> str:  # Fetch
        return self.name[:-len("Request")]

    def is_flexible(self, version: int) -> bool:
        return in_range(version, self.flexible)

    def request_header_version(self, version: int) -> int:
        # ControlledShutdown v0 uses header v0 (a Kafka quirk kept by kproto.protocol.headers).
        if self.api_key == 7 and version == 0:
            return 0
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        if self.api_key == 18:  # ApiVersions answers always use header v0
            return 0
        return 1 if self.is_flexible(version) else 0


@lru_cache(maxsize=None)
def fields_of(class_name: str) -> tuple[FieldSpec, ...]:
    return tuple(FieldSpec(*raw) for raw in _schema.STRUCTS[class_name])


@lru_cache(maxsize=None)
def _apis() -> dict[int, ApiSpec]:
    out = {}
    for name, (key, valid, flexible, module, root) in _schema.MESSAGES.items():
        if key is not None and name.endswith("Request"):
            out[key] = ApiSpec(name, key, valid[0], valid[1], flexible, module, root)
    return out


def apis() -> dict[int, ApiSpec]:
    """Every request API by key."""
    return dict(_apis())


def api(key: int) -> ApiSpec:
    return _apis()[key]


def api_by_name(name: str) -> Optional[ApiSpec]:
    """``Fetch``, ``FetchRequest`` or ``fetch`` (case-insensitive) -> the API, else None."""
    want = name.strip().lower()
    for spec in _apis().values():
        if want in (spec.api_name.lower(), spec.name.lower()):
            return spec
    return None


@lru_cache(maxsize=None)
def class_of(module: str, class_name: str) -> Any:
    return getattr(importlib.import_module("kproto.messages." + module), class_name)


def struct_class(spec: ApiSpec, class_name: str) -> Any:
    return class_of(spec.module, class_name)


def response_class(spec: ApiSpec) -> Any:
    return class_of(spec.module, spec.name[:-len("Request")] + "Response")


def compact(spec: ApiSpec, f: FieldSpec, version: int) -> bool:
    """Whether the field uses compact (varint-length) encoding in this version."""
    if f.flexible is not None:
        return in_range(version, f.flexible)
    return spec.is_flexible(version)


__all__ = ["FieldSpec", "ApiSpec", "Range", "in_range", "fields_of", "apis", "api",
           "api_by_name", "class_of", "struct_class", "response_class", "compact"]
