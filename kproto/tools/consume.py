"""The ``consume`` command: ``python -m kproto consume ...`` (the README's main job).

Owns printing the records of a topic like kafka-console-consumer, or JSON lines with
``--json``: it reads until interrupted (Ctrl-C, SIGTERM) unless ``--max-messages`` or
``--timeout-ms`` ends it sooner, and says "Processed a total of N messages" on stderr
however it ends, as kafka-console-consumer does. Without ``--bootstrap-server`` it starts
the embedded Tansu broker (:mod:`kproto.tools.embedded`, ``kproto[embedded]``), seeds a
sample topic with an independent producer and consumes it, so a fresh machine can see
kproto work end to end. ``--consumer-property KEY=VALUE`` (as kafka-console-consumer's)
passes any KafkaConsumer argument, e.g. TLS or SASL settings. ``--share-group`` reads as a
member of a share group (KIP-932).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import logging
import signal
import sys
import time
from typing import Any, Optional, Sequence
from kproto.errors import ToolError

SAMPLE_TOPIC = "kproto-sample"
JOIN_WAIT_S = 60.0


def _text(data: Optional[bytes]) -> Optional[str]:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def _timestamp(ms: int, style: str) -> Any:
    """A record's timestamp for ``--json``: epoch milliseconds, or ISO-8601 in UTC."""
    if style == "ms":
        return ms
    if ms < 0:  # -1: the record has no timestamp
        return None
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _format(record: Any, as_json: bool, print_key: bool, timestamp_format: str = "ms") -> str:
    if as_json:
        # ensure_ascii=False: UTF-8 text stays readable (and the stream is UTF-8 anyway).
        return json.dumps({
            "topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp": _timestamp(record.timestamp, timestamp_format),
            "timestamp_type": record.timestamp_type,
            "key": _text(record.key), "value": _text(record.value),
            "headers": [[k, _text(v)] for k, v in record.headers],
            **({"delivery_count": record.delivery_count} if hasattr(record, "delivery_count") else {}),
        }, ensure_ascii=False)
    value = _plain(record.value)
    return "{}\t{}".format(_plain(record.key), value) if print_key else value


def _plain(data: Optional[bytes]) -> str:
    """A key or value in plain output: ``null`` when absent, as kafka-console-consumer."""
    text = _text(data)
    return "null" if text is None else text


class _Processed:
    """The count kafka-console-consumer reports on exit, however the run ends."""

    def __init__(self) -> None:
        self.count = 0
        self.started = False

    def report(self, suffix: str = "") -> None:
        if self.started:
            print("Processed a total of {} messages{}".format(self.count, suffix), file=sys.stderr)


def consume(args: argparse.Namespace, out: Any = sys.stdout) -> int:
    """Run the consume command; returns the number of records printed.

    With the embedded broker, fewer records than were seeded is an error (the demo's
    promise is that every record comes back). "Processed a total of N messages" goes to
    stderr once consuming started, whether it ended by a limit, an error or Ctrl-C.
    """
    if args.share_group:
        return consume_share(args, out)
    if args.release or args.reject:
        raise ToolError("--release and --reject need --share-group")
    processed = _Processed()
    try:
        return _consume(args, out, processed)
    finally:
        processed.report()


def _consume(args: argparse.Namespace, out: Any, processed: _Processed) -> int:
    from kproto import KafkaConsumer, TopicPartition
    from kproto.consumer.reachability import await_reachable

    broker = None
    bootstrap = args.bootstrap_server
    topic = args.topic
    max_messages = args.max_messages
    from_beginning = args.from_beginning
    expected = None
    try:
        if bootstrap is None:
            from kproto.tools.embedded import TansuBroker, seed_topic

            broker = TansuBroker().start()
            bootstrap = broker.bootstrap_servers
            topic = topic or SAMPLE_TOPIC
            expected = seed_topic(bootstrap, topic, args.sample_records, partitions=3)
            print("kproto: embedded broker on {}, seeded {} records into {!r}".format(
                bootstrap, expected, topic), file=sys.stderr)
            from_beginning = True
            if max_messages is None:
                max_messages = expected
        if topic is None:
            raise ToolError("--topic is required when --bootstrap-server is given")
        configs = dict(bootstrap_servers=bootstrap, client_id="kproto-console-consumer",
                       auto_offset_reset="earliest" if from_beginning else "latest",
                       group_protocol=args.group_protocol, enable_auto_commit=args.group is not None)
        if args.group:
            configs["group_id"] = args.group
        configs.update(parse_consumer_properties(args.consumer_property))
        with KafkaConsumer(**configs) as consumer:
            # A wrong address, port or security protocol is an error line in seconds, with
            # the cause, before any subscription (a group member would otherwise wait for
            # an assignment that never comes).
            await_reachable(consumer, bootstrap, "kproto consume")
            if args.group:
                consumer.subscribe([topic])
            else:
                partitions = consumer.partitions_for_topic(topic)
                if not partitions:
                    raise ToolError("topic {!r} not found on {}".format(topic, bootstrap))
                consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
            processed.started = True
            _print_records(consumer, out, args, max_messages, processed)
    finally:
        if broker is not None:
            broker.stop()
    printed = processed.count
    if expected is not None and printed < expected:
        raise ToolError("consumed {} of the {} seeded records".format(printed, expected))
    return printed


def consume_share(args: argparse.Namespace, out: Any = sys.stdout) -> int:
    """``--share-group``: read as a member of a share group (KIP-932), acknowledging each
    printed record (ACCEPT, or RELEASE / REJECT to try the semantics by hand). Records a
    poll returned beyond ``--max-messages`` are released unprinted, for other members."""
    from kproto import AcknowledgeType, KafkaShareConsumer

    if args.bootstrap_server is None or args.topic is None:
        raise ToolError("--share-group needs --bootstrap-server and --topic (the embedded broker has no share groups)")
    if args.release and args.reject:
        raise ToolError("choose one of --release and --reject")
    kind = AcknowledgeType.RELEASE if args.release else AcknowledgeType.REJECT if args.reject \
        else AcknowledgeType.ACCEPT
    configs = dict(bootstrap_servers=args.bootstrap_server, client_id="kproto-console-share-consumer",
                   group_id=args.share_group, share_acknowledgement_mode="explicit")
    configs.update(parse_consumer_properties(args.consumer_property))
    processed = _Processed()
    try:
        with KafkaShareConsumer(args.topic, **configs) as consumer:
            processed.started = True
            _print_share_records(consumer, out, args, kind, processed)
    finally:
        processed.report(" ({})".format(kind.name))
    return processed.count


def _print_share_records(consumer: Any, out: Any, args: argparse.Namespace, kind: Any,
                         processed: _Processed) -> None:
    from kproto import AcknowledgeType

    printed = 0
    idle_deadline = time.monotonic() + args.timeout_ms / 1000
    while args.max_messages is None or printed < args.max_messages:
        batch = [r for records in consumer.poll(500).values() for r in records]
        lines: list[str] = []
        for record in batch:
            if args.max_messages is None or printed + len(lines) < args.max_messages:
                lines.append(_format(record, args.json, args.print_key, args.timestamp_format))
                consumer.acknowledge(record, kind)
            else:
                consumer.acknowledge(record, AcknowledgeType.RELEASE)
        if lines:
            # Counted before the write, as kafka-console-consumer does: a Ctrl-C landing
            # just after the write must not report fewer records than were printed.
            printed += len(lines)
            processed.count = printed
            out.write("\n".join(lines) + "\n")
            idle_deadline = time.monotonic() + args.timeout_ms / 1000
        elif args.timeout_ms >= 0 and time.monotonic() > idle_deadline:
            break
    consumer.commit()
    out.flush()


def _print_records(consumer: Any, out: Any, args: argparse.Namespace, max_messages: Optional[int],
                   processed: _Processed) -> None:
    """Poll and print until ``max_messages``, ``--timeout-ms`` without records (when not -1)
    or an interrupt; ``processed.count`` follows what was printed."""
    printed = 0
    idle_deadline = time.monotonic() + args.timeout_ms / 1000
    # A group member has nothing to read until its first assignment: the idle timer starts
    # then (a rebalance may take longer than --timeout-ms), but not later than JOIN_WAIT_S.
    join_deadline = time.monotonic() + JOIN_WAIT_S
    while max_messages is None or printed < max_messages:
        limit = None if max_messages is None else max_messages - printed
        batch = consumer.poll(timeout_ms=500, max_records=limit)
        waiting_for_assignment = bool(args.group) and not consumer.assignment() \
            and time.monotonic() < join_deadline
        if batch or waiting_for_assignment:
            idle_deadline = time.monotonic() + args.timeout_ms / 1000
        if batch:
            lines = [_format(r, args.json, args.print_key, args.timestamp_format)
                     for records in batch.values() for r in records]
            # Counted before the write, as kafka-console-consumer does: a Ctrl-C landing
            # just after the write must not report fewer records than were printed.
            printed += len(lines)
            processed.count = printed
            out.write("\n".join(lines) + "\n")
        elif args.timeout_ms >= 0 and time.monotonic() > idle_deadline:
            break
    out.flush()


def parse_consumer_properties(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs into KafkaConsumer kwargs.

    Keys take kafka-python's names or Java's dotted ones (``security.protocol`` is
    ``security_protocol``); values that read as integers or true/false become those, the
    rest stay strings. The consumer's own validation rejects unknown keys and bad values.
    """
    configs: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().replace(".", "_").replace("-", "_")
        if not sep or not key:
            raise ToolError("--consumer-property wants KEY=VALUE, not {!r}".format(item))
        value: Any = raw
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            try:
                value = int(raw)
            except ValueError:
                pass
        configs[key] = value
    return configs


def build_parser() -> argparse.ArgumentParser:
    c = argparse.ArgumentParser(prog="python -m kproto consume",
                                description="Print the records of a topic, as kafka-console-consumer: "
                                            "until interrupted (Ctrl-C) unless --max-messages or "
                                            "--timeout-ms ends it; 'Processed a total of N messages' "
                                            "on stderr at the end.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    c.add_argument("--bootstrap-server", help="host:port[,host:port]; omit to use an embedded broker")
    c.add_argument("--topic", help="topic to consume (required with --bootstrap-server; "
                                   "the embedded broker's sample topic is %s)" % SAMPLE_TOPIC)
    c.add_argument("--group", help="consumer group id (subscribe with group management)")
    c.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    c.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                   help="with --group: JoinGroup/SyncGroup (classic) or KIP-848 (consumer)")
    c.add_argument("--share-group", metavar="GROUP",
                   help="read as a member of this share group (KIP-932), acknowledging each printed record")
    c.add_argument("--release", action="store_true",
                   help="with --share-group: RELEASE each printed record (it is delivered again)")
    c.add_argument("--reject", action="store_true",
                   help="with --share-group: REJECT each printed record (never delivered again)")
    c.add_argument("--max-messages", type=int,
                   help="stop after this many records (None: no limit; the embedded broker's "
                        "demo stops after the records it seeded)")
    c.add_argument("--timeout-ms", type=int, default=-1,
                   help="stop after this long without records (-1: never, wait until interrupted)")
    c.add_argument("--json", action="store_true",
                   help="print JSON lines with every field (UTF-8 as it is; bytes that are not "
                        "UTF-8 as base64:...)")
    c.add_argument("--timestamp-format", choices=("ms", "iso"), default="ms",
                   help="--json timestamps as epoch milliseconds or ISO-8601 UTC "
                        "(2026-01-02T03:04:05.678Z)")
    c.add_argument("--print-key", action="store_true", help="print key<TAB>value")
    c.add_argument("--sample-records", type=int, default=1000,
                   help="records to seed into the embedded broker's sample topic")
    c.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="any KafkaConsumer argument (kafka-python or Java name), e.g. "
                        "security.protocol=SASL_SSL; repeatable")
    c.add_argument("--debug", action="store_true", help="log at DEBUG (kproto.wire shows the protocol)")
    return c



def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str]) -> int:
    """Exit status: 0 on success, 1 on an error (one line on stderr), 130 on Ctrl-C."""
    args = build_parser().parse_args(list(argv))
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from kproto.errors import KafkaError

    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, _interrupted)  # `kill` ends a run as Ctrl-C does
    try:
        consume(args)
    except (ToolError, KafkaError) as exc:
        print("kproto: error: {}".format(exc), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as Unix tools do.
        sys.stderr.close()
        return 0
    return 0
