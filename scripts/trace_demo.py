"""Record a three-member KIP-848 rebalance through ``kproto trace`` (the README's picture).

Run from the repository root with the test extras installed::

    .venv/bin/python scripts/trace_demo.py /tmp/demo   # writes demo.jsonl, demo-events.jsonl, demo.html

Three kproto members join a group on librdkafka's mock cluster (3 brokers) three seconds
apart, the first one leaves, the others take its partitions; every connection goes through
the tracing proxy and the members' kproto.events are recorded beside the wire.
"""

from __future__ import annotations

import sys
import threading
import time

from kproto import KafkaConsumer
from kproto.transition_log import JsonlEventHandler
from kproto.tools.trace.html import write_page
from kproto.tools.trace.proxy import TraceProxy
from kproto.tools.trace.report import JsonlWriter, read_events
from tests.brokers.mock_cluster import MockCluster


def main(prefix: str) -> None:
    wire, inner = prefix + ".jsonl", prefix + "-events.jsonl"
    handler = JsonlEventHandler.attach(inner)
    with open(wire, "w", encoding="utf-8") as out, MockCluster(3) as cluster:
        cluster.set_group_consumer_heartbeat_interval(1000)
        topic = cluster.new_topic(partitions=6, prefix="orders")
        cluster.produce(topic, 60)
        with TraceProxy(cluster.addresses[0], JsonlWriter(out).write, keep_trees=True) as proxy:
            stops, threads = [], []
            for i in range(3):
                consumer = KafkaConsumer(bootstrap_servers=proxy.bootstrap_servers, group_id="billing",
                                         client_id="member-{}".format(i + 1), group_protocol="consumer",
                                         auto_offset_reset="earliest", fetch_max_wait_ms=2000)
                consumer.subscribe([topic])
                stop = threading.Event()

                def run(c: KafkaConsumer = consumer, s: threading.Event = stop) -> None:
                    while not s.is_set():
                        c.poll(100)
                    c.close()

                threads.append(threading.Thread(target=run))
                threads[-1].start()
                stops.append(stop)
                time.sleep(3)
            stops[0].set()
            threads[0].join()
            time.sleep(3)
            for stop in stops:
                stop.set()
            for thread in threads:
                thread.join()
    handler.detach()
    write_page(read_events([wire, inner]), prefix + ".html",
               title="kproto trace: a KIP-848 group of three members")
    print("open {}.html (add #quiet to the address to hide Fetch and heartbeats)".format(prefix))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "trace-demo")
