"""Command line: ``python -m kproto consume ...`` (the README's main job).

``consume`` prints records of a topic like kafka-console-consumer, or JSON lines with
``--json``. Without ``--bootstrap-server`` it starts the embedded Tansu broker
(``kproto[embedded]``), seeds a sample topic with an independent producer and consumes it,
so a fresh machine can see kproto work end to end. ``--consumer-property KEY=VALUE`` (as
kafka-console-consumer's) passes any KafkaConsumer argument, e.g. TLS or SASL settings.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import sys
import time
from typing import Any, Optional, Sequence

SAMPLE_TOPIC = "kproto-sample"
JOIN_WAIT_S = 60.0


def _text(data: Optional[bytes]) -> Optional[str]:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def _format(record: Any, as_json: bool, print_key: bool) -> str:
    if as_json:
        return json.dumps({
            "topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp": record.timestamp, "timestamp_type": record.timestamp_type,
            "key": _text(record.key), "value": _text(record.value),
            "headers": [[k, _text(v)] for k, v in record.headers],
            **({"delivery_count": record.delivery_count} if hasattr(record, "delivery_count") else {}),
        })
    value = _plain(record.value)
    return "{}\t{}".format(_plain(record.key), value) if print_key else value


def _plain(data: Optional[bytes]) -> str:
    """A key or value in plain output: ``null`` when absent, as kafka-console-consumer."""
    text = _text(data)
    return "null" if text is None else text


def consume(args: argparse.Namespace, out: Any = sys.stdout) -> int:
    """Run the consume command; returns the number of records printed.

    With the embedded broker, fewer records than were seeded is an error (the demo's
    promise is that every record comes back).
    """
    from kproto import KafkaConsumer, TopicPartition
    from kproto.consumer.reachability import await_reachable

    if args.share_group:
        return consume_share(args, out)
    if args.release or args.reject:
        raise CliError("--release and --reject need --share-group")
    broker = None
    bootstrap = args.bootstrap_server
    topic = args.topic
    max_messages = args.max_messages
    from_beginning = args.from_beginning
    expected = None
    printed = 0
    try:
        if bootstrap is None:
            from kproto.embedded import TansuBroker, seed_topic

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
            raise CliError("--topic is required when --bootstrap-server is given")
        configs = dict(bootstrap_servers=bootstrap, client_id="kproto-console-consumer",
                       auto_offset_reset="earliest" if from_beginning else "latest",
                       group_protocol=args.group_protocol, enable_auto_commit=args.group is not None)
        if args.group:
            configs["group_id"] = args.group
        configs.update(parse_consumer_properties(args.consumer_property))
        with KafkaConsumer(**configs) as consumer:
            # A wrong address, port or security protocol is an error line in seconds, with
            # the cause, before any subscription (a group member would otherwise wait for
            # an assignment that never comes and exit 0).
            await_reachable(consumer, bootstrap, "kproto consume")
            if args.group:
                consumer.subscribe([topic])
            else:
                partitions = consumer.partitions_for_topic(topic)
                if not partitions:
                    raise CliError("topic {!r} not found on {}".format(topic, bootstrap))
                consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
            printed = _print_records(consumer, out, args, max_messages)
    finally:
        if broker is not None:
            broker.stop()
    print("kproto: consumed {} records".format(printed), file=sys.stderr)
    if expected is not None and printed < expected:
        raise CliError("consumed {} of the {} seeded records".format(printed, expected))
    return printed


def consume_share(args: argparse.Namespace, out: Any = sys.stdout) -> int:
    """``--share-group``: read as a member of a share group (KIP-932), acknowledging each
    printed record (ACCEPT, or RELEASE / REJECT to try the semantics by hand). Records a
    poll returned beyond ``--max-messages`` are released unprinted, for other members."""
    from kproto import AcknowledgeType, KafkaShareConsumer

    if args.bootstrap_server is None or args.topic is None:
        raise CliError("--share-group needs --bootstrap-server and --topic (the embedded broker has no share groups)")
    if args.release and args.reject:
        raise CliError("choose one of --release and --reject")
    kind = AcknowledgeType.RELEASE if args.release else AcknowledgeType.REJECT if args.reject \
        else AcknowledgeType.ACCEPT
    configs = dict(bootstrap_servers=args.bootstrap_server, client_id="kproto-console-share-consumer",
                   group_id=args.share_group, share_acknowledgement_mode="explicit")
    configs.update(parse_consumer_properties(args.consumer_property))
    printed = 0
    with KafkaShareConsumer(args.topic, **configs) as consumer:
        idle_deadline = time.monotonic() + args.timeout_ms / 1000
        while args.max_messages is None or printed < args.max_messages:
            batch = [r for records in consumer.poll(500).values() for r in records]
            lines: list[str] = []
            for record in batch:
                if args.max_messages is None or printed + len(lines) < args.max_messages:
                    lines.append(_format(record, args.json, args.print_key))
                    consumer.acknowledge(record, kind)
                else:
                    consumer.acknowledge(record, AcknowledgeType.RELEASE)
            if lines:
                out.write("\n".join(lines) + "\n")
                printed += len(lines)
                idle_deadline = time.monotonic() + args.timeout_ms / 1000
            elif args.timeout_ms >= 0 and time.monotonic() > idle_deadline:
                break
        consumer.commit()
    out.flush()
    print("kproto: consumed {} records ({})".format(printed, kind.name), file=sys.stderr)
    return printed


def _print_records(consumer: Any, out: Any, args: argparse.Namespace, max_messages: Optional[int]) -> int:
    """Poll and print until ``max_messages`` or ``--timeout-ms`` without records."""
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
            lines = [_format(r, args.json, args.print_key) for records in batch.values() for r in records]
            out.write("\n".join(lines) + "\n")
            printed += len(lines)
        elif args.timeout_ms >= 0 and time.monotonic() > idle_deadline:
            break
    out.flush()
    return printed


class CliError(Exception):
    """A usage or run-time problem reported as one line on stderr (exit status 1)."""


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
            raise CliError("--consumer-property wants KEY=VALUE, not {!r}".format(item))
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
    parser = argparse.ArgumentParser(prog="python -m kproto",
                                     description="kproto: a pure-Python Kafka consumer")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("trace", help="a decoding proxy for any client (python -m kproto trace -h)")
    sub.add_parser("fuzz", help="fuzz a broker at the protocol level (python -m kproto fuzz -h)")
    c = sub.add_parser("consume", help="print the records of a topic")
    c.add_argument("--bootstrap-server", help="host:port[,host:port]; omit to use an embedded broker")
    c.add_argument("--topic", help="topic to consume (default with the embedded broker: %s)" % SAMPLE_TOPIC)
    c.add_argument("--group", help="consumer group id (subscribe with group management)")
    c.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    c.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
    c.add_argument("--share-group", metavar="GROUP",
                   help="read as a member of this share group (KIP-932), acknowledging each printed record")
    c.add_argument("--release", action="store_true",
                   help="with --share-group: RELEASE each printed record (it is delivered again)")
    c.add_argument("--reject", action="store_true",
                   help="with --share-group: REJECT each printed record (never delivered again)")
    c.add_argument("--max-messages", type=int, help="stop after this many records")
    c.add_argument("--timeout-ms", type=int, default=10000,
                   help="stop after this long without records (-1: never)")
    c.add_argument("--json", action="store_true", help="print JSON lines with every field")
    c.add_argument("--print-key", action="store_true", help="print key<TAB>value")
    c.add_argument("--sample-records", type=int, default=1000,
                   help="records to seed into the embedded broker's sample topic")
    c.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="any KafkaConsumer argument (kafka-python or Java name), e.g. "
                        "security.protocol=SASL_SSL; repeatable")
    c.add_argument("--debug", action="store_true", help="log at DEBUG (kproto.wire shows the protocol)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Exit status: 0 on success, 1 on an error (one line on stderr), 130 on Ctrl-C."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["trace"]:  # the decoding proxy has its own command line
        from kproto.trace.cli import main as trace_main

        return trace_main(argv[1:])
    if argv[:1] == ["fuzz"]:  # the protocol fuzzer has its own command line
        from kproto.fuzz.cli import main as fuzz_main

        return fuzz_main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from kproto.errors import KafkaError

    try:
        if args.command == "consume":
            consume(args)
    except (CliError, KafkaError) as exc:
        print("kproto: error: {}".format(exc), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as Unix tools do.
        sys.stderr.close()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
