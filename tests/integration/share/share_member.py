"""A kproto share-group member in a process of its own, for tests that kill one.

``python -m tests.integration.share.share_member BOOTSTRAP TOPIC GROUP`` joins share group
GROUP on TOPIC (explicit acknowledgement, ``max_poll_records`` 5, ``record_limit``), polls until it holds
records, prints them as one JSON line (``{"held": [[partition, offset, delivery_count],
...]}``) and then holds them without acknowledging until it is killed.
"""

from __future__ import annotations

import json
import sys
import time

from kproto import KafkaShareConsumer

DEADLINE_S = 120


def main(argv: list[str]) -> int:
    bootstrap, topic, group = argv
    consumer = KafkaShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group, max_poll_records=5,
                                  share_acknowledgement_mode="explicit", fetch_max_wait_ms=100,
                                  share_acquire_mode="record_limit")
    deadline = time.monotonic() + DEADLINE_S
    held: list = []
    while not held and time.monotonic() < deadline:
        held = [r for batch in consumer.poll(200).values() for r in batch]
    print(json.dumps({"held": [[r.partition, r.offset, r.delivery_count] for r in held]}), flush=True)
    while True:  # hold them; the background thread keeps heartbeating until the kill
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
