"""The fuzzer's safety rules, sans-IO: what a run may send and what it may name.

APIs that create, change or delete carry only names under the prefix and only the
fuzzer's own topic ids, whatever the generator drew; cluster-internal APIs stay out of the
plan unless asked for; the plan follows --api/--versions/--skip-api and refuses what it
cannot do.
"""

import random
import uuid

import pytest

from kproto.errors import ToolUsageError
from kproto.tools.fuzz import schema
from kproto.tools.fuzz.plan import CLUSTER_APIS, PREFIXED_APIS, enforce_prefix, resolve_plan
from kproto.tools.fuzz.values import Knowledge, TopicInfo, ValueGenerator, every_version

OWN = TopicInfo("kproto-fuzz-seed", uuid.uuid4(), [0, 1, 2])
OTHER = TopicInfo("payments", uuid.uuid4(), [0])
KNOW = Knowledge(topics=[OWN, OTHER], node_ids=[1])


def _values(obj):
    for name in getattr(obj, "_fields", ()):
        value = getattr(obj, name)
        for item in value if isinstance(value, list) else [value]:
            if hasattr(item, "_fields"):
                yield from _values(item)
            else:
                yield item


@pytest.mark.parametrize("api", sorted(PREFIXED_APIS))
def test_state_changing_requests_name_only_the_fuzzers_own_things(api):
    spec = schema.api_by_name(api)
    if spec is None:
        pytest.skip("{} is not in this schema set".format(api))
    gen = ValueGenerator(random.Random(api), KNOW)
    for version in every_version(spec):
        for _ in range(10):
            request = enforce_prefix(gen.request(spec, version), Knowledge(topics=[OWN]))
            for value in _values(request):
                if isinstance(value, str):
                    assert value == "" or value.startswith("kproto-fuzz-"), (api, value)
                if isinstance(value, uuid.UUID):
                    assert value != OTHER.topic_id, api


ADVERTISED = {k: (s.min_version, s.max_version) for k, s in schema.apis().items()}


def test_cluster_apis_are_left_out_unless_asked_for():
    names = {spec.api_name for spec, _ in resolve_plan(ADVERTISED)}
    assert names and not names & CLUSTER_APIS
    names = {spec.api_name for spec, _ in resolve_plan(ADVERTISED, cluster_apis=True)}
    assert CLUSTER_APIS & names


def test_the_plan_follows_the_options():
    plan = resolve_plan({1: (4, 16), 11: (0, 9)}, apis=["Fetch", "joingroup"],
                        versions=(12, 17), skip_apis=[])
    assert [(s.api_name, v) for s, v in plan] == [("Fetch", [12, 13, 14, 15, 16])]
    assert resolve_plan({1: (0, 16), 3: (0, 12)}, skip_apis=["Fetch"])[0][0].api_name == \
        "Metadata"
    with pytest.raises(ToolUsageError, match="unknown API 'Nope'"):
        resolve_plan({1: (0, 16)}, apis=["Nope"])
    with pytest.raises(ToolUsageError, match="does not advertise Metadata"):
        resolve_plan({1: (0, 16)}, apis=["Metadata"])
    with pytest.raises(ToolUsageError, match="empty version range"):
        resolve_plan({1: (0, 16)}, versions=(5, 4))
    with pytest.raises(ToolUsageError, match="no API version to fuzz"):
        resolve_plan({1: (0, 16)}, versions=(100, 200))
