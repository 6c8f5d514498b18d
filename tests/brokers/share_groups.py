"""Share-group (KIP-932) settings on any test broker that has share groups.

Owns :func:`configure_share_group`: the settings a share-group test gives its group, in
one vocabulary for both brokers that serve share groups:

- Apache Kafka keeps them per group: group configs written with IncrementalAlterConfigs
  (confluent-kafka's admin client, resource type GROUP; Kafka's names ``share.*``, see
  :data:`KAFKA_GROUP_CONFIGS`). Kafka bounds some of them by broker settings
  (``group.share.min.record.lock.duration.ms`` ...): a value under the broker's bound is
  raised to it (the test broker lowers the bounds, :data:`tests.brokers.apache.SHARE_GROUP_BOUNDS`;
  a broker of one's own keeps Kafka's), and the settings in force are returned;
- librdkafka's mock keeps them for the whole cluster (``MockCluster.set_sharegroup``):
  a test that changes more than the offset reset uses a cluster of its own.
"""

from __future__ import annotations

from typing import Any

#: setting -> (Kafka's group config, the broker setting bounding it from below or None).
KAFKA_GROUP_CONFIGS: dict[str, tuple[str, str | None]] = {
    "auto_offset_reset": ("share.auto.offset.reset", None),
    "record_lock_duration_ms": ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms"),
    "delivery_count_limit": ("share.delivery.count.limit", "group.share.min.delivery.count.limit"),
    "heartbeat_interval_ms": ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms"),
    "session_timeout_ms": ("share.session.timeout.ms", "group.share.min.session.timeout.ms"),
    "isolation_level": ("share.isolation.level", None),
    "renew_acknowledge_enable": ("share.renew.acknowledge.enable", None),
}

#: setting -> the mock's ``set_sharegroup`` keyword (None: the mock has no such setting).
MOCK_SETTINGS: dict[str, str | None] = {
    "auto_offset_reset": "auto_offset_reset",
    "record_lock_duration_ms": "record_lock_duration_ms",
    "delivery_count_limit": "max_delivery_attempts",
    "heartbeat_interval_ms": "heartbeat_interval_ms",
    "session_timeout_ms": "session_timeout_ms",
    "isolation_level": "isolation_level",
    "renew_acknowledge_enable": None,
}


def configure_share_group(broker: Any, group: str, **settings: Any) -> dict[str, Any]:
    """Give share group ``group`` on ``broker`` the ``settings`` (keys of
    :data:`KAFKA_GROUP_CONFIGS`; None leaves one as it is) before its members join;
    returns the settings in force (raised to the broker's lower bounds on Kafka)."""
    unknown = sorted(set(settings) - set(KAFKA_GROUP_CONFIGS))
    if unknown:
        raise ValueError("unknown share-group settings: {}".format(", ".join(unknown)))
    settings = {k: v for k, v in settings.items() if v is not None}
    if broker.name == "mock":
        missing = sorted(k for k in settings if MOCK_SETTINGS[k] is None)
        if missing:
            raise ValueError("librdkafka's mock has no share-group setting for {}".format(", ".join(missing)))
        broker.set_sharegroup(**{MOCK_SETTINGS[k]: v for k, v in settings.items()})
        return settings
    return _alter_group_configs(broker.bootstrap_servers, group, settings)


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def _broker_bounds(admin: Any, names: list[str]) -> dict[str, int]:
    """The broker settings ``names`` (integers) of the first broker in the metadata."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    node_id = sorted(admin.list_topics(timeout=10).brokers)[0]
    resource = ConfigResource(ResourceType.BROKER, str(node_id))
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    return {name: int(entries[name].value) for name in names if name in entries and entries[name].value}


def _alter_group_configs(bootstrap: str, group: str, settings: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = _admin(bootstrap)
    bounded = [KAFKA_GROUP_CONFIGS[k][1] for k in settings if KAFKA_GROUP_CONFIGS[k][1]]
    bounds = _broker_bounds(admin, [b for b in bounded if b]) if bounded else {}
    in_force: dict[str, Any] = {}
    entries = []
    for key, value in settings.items():
        name, bound = KAFKA_GROUP_CONFIGS[key]
        if bound in bounds and isinstance(value, int) and value < bounds[bound]:
            value = bounds[bound]
        in_force[key] = value
        text = str(value).lower() if isinstance(value, bool) else str(value)
        entries.append(ConfigEntry(name, text, incremental_operation=AlterConfigOpType.SET))
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    return in_force
