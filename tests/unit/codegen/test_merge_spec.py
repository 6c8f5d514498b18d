"""codegen/merge_spec.py on small schemas: ranges joined, old-only fields kept in place,
changes that would alter an old version refused."""

import pytest

from codegen.merge_spec import MergeError, check_exact, merge

OLD = {"apiKey": 99, "type": "request", "name": "XRequest", "validVersions": "0-4",
       "flexibleVersions": "3+", "fields": [
           {"name": "A", "type": "int32", "versions": "0+"},
           {"name": "Gone", "type": "string", "versions": "0-2", "nullableVersions": "1-2"},
           {"name": "B", "type": "int64", "versions": "1+", "default": "-1"},
           {"name": "T", "type": "int8", "versions": "3+", "taggedVersions": "3+", "tag": 0}]}
NEW = {"apiKey": 99, "type": "request", "name": "XRequest", "validVersions": "2-5",
       "flexibleVersions": "3+", "fields": [
           {"name": "A", "type": "int32", "versions": "2+"},
           {"name": "B", "type": "int64", "versions": "2+", "default": "-1"},
           {"name": "C", "type": "uuid", "versions": "5+"},
           {"name": "T", "type": "int8", "versions": "3+", "taggedVersions": "3+", "tag": 0}]}


def test_old_versions_below_the_new_range_are_merged():
    merged, old, new = merge(OLD, NEW)
    assert (old, new) == (range(0, 2), range(2, 6))
    assert merged["validVersions"] == "0-5" and merged["flexibleVersions"] == "3+"
    fields = {f["name"]: f for f in merged["fields"]}
    assert [f["name"] for f in merged["fields"]] == ["A", "Gone", "B", "C", "T"]
    assert fields["A"]["versions"] == "0+" and fields["B"]["versions"] == "1+"
    # only the versions taken from the old schema keep the old-only field
    assert fields["Gone"]["versions"] == "0-1" and fields["Gone"]["nullableVersions"] == "1"
    check_exact(OLD, merged, range(0, 2))
    check_exact(NEW, merged, range(2, 6))


def test_a_change_to_an_old_field_is_refused():
    changed = dict(NEW, fields=[dict(NEW["fields"][1], default="0")] + NEW["fields"][:1])
    with pytest.raises(MergeError, match="default"):
        merge(OLD, changed)


def test_check_exact_sees_a_shifted_version():
    merged, _, _ = merge(OLD, NEW)
    shifted = dict(merged, fields=[dict(f, versions="2+") if f["name"] == "B" else f
                                   for f in merged["fields"]])
    with pytest.raises(MergeError, match="v1"):
        check_exact(OLD, shifted, range(0, 2))


def test_an_unstable_old_latest_is_not_kept():
    old = dict(OLD, validVersions="0-1", latestVersionUnstable=True)
    assert merge(dict(old, latestVersionUnstable=False), NEW)[1] == range(0, 2)
    # without the unstable v1 the old versions no longer reach the new ones
    with pytest.raises(MergeError, match="gap"):
        merge(old, NEW)
