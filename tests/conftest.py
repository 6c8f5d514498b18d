"""Shared pytest configuration: real brokers for the test suite.

Registers the ``needs`` marker and the ``--brokers`` option and provides the broker
fixtures documented in :mod:`tests.brokers` (read its docstring for the API).
"""

from __future__ import annotations

import pytest

# Test helpers live in modules of their own next to the tests (reading.py, harness.py, ...):
# their asserts get pytest's explanations too.
pytest.register_assert_rewrite("tests.integration", "tests.unit")

from tests.brokers.base import BROKER_CAPABILITIES, CAPABILITIES  # noqa: E402

# pytester runs inner pytest sessions (the needs-marker tests use it).
pytest_plugins = ["pytester"]

BROKER_KINDS = ("mock", "apache_kafka", "tansu", "tansu_sessions")
# Kinds the `broker` fixture offers only to tests that name them in broker_kinds, or need
# the capability given here. Apache Kafka 4.4 is the reference broker and the mock the
# fault injector: every test runs on both. Tansu is a second implementation: tests whose
# subject is the bytes a broker serves (messages, records, fetch decoding, the fixtures)
# name it; group and consumer behaviour is Kafka's to judge. Tansu behind the fetch-session
# front serves the tests that need fetch sessions. `--brokers=tansu` names Tansu outright
# and runs every test that can run there on it.
OPT_IN_KINDS: dict[str, str | None] = {"tansu": None, "tansu_sessions": "fetch_sessions"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--brokers", default=None,
        help="comma-separated broker kinds the `broker` fixture runs on (default: {}; "
             "Tansu only for the tests that name it, unless named here)".format(
                 ",".join(BROKER_KINDS)))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "needs(*capabilities): the test runs only on brokers offering every capability "
        "(one of: {}); others skip with the reason".format(", ".join(sorted(CAPABILITIES))))
    config.addinivalue_line(
        "markers", "broker_kinds(*kinds): restrict the `broker` fixture to these kinds")
    config.addinivalue_line(
        "markers", "heavy: minutes of data (millions of records); run only when asked for "
                   "with -m heavy, never in the suite or CI")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "heavy" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="heavy: run with -m heavy")
    for item in items:
        if item.get_closest_marker("heavy") is not None:
            item.add_marker(skip)


def _needs(node) -> frozenset[str]:
    wanted: set[str] = set()
    for mark in node.iter_markers("needs"):
        wanted.update(mark.args)
    unknown = wanted - set(CAPABILITIES)
    if unknown:
        raise pytest.UsageError("{}: unknown capability {} in @pytest.mark.needs; known: {}"
                                .format(node.nodeid, sorted(unknown), sorted(CAPABILITIES)))
    return frozenset(wanted)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker" not in metafunc.fixturenames:
        return
    option = metafunc.config.getoption("--brokers")
    selected = [k.strip() for k in (option or ",".join(BROKER_KINDS)).split(",") if k.strip()]
    bad = set(selected) - set(BROKER_KINDS)
    if bad:
        raise pytest.UsageError("--brokers: unknown kind(s) {}".format(sorted(bad)))
    # A kind named in --brokers is wanted everywhere it can run (Tansu behind the front
    # still only where fetch sessions are needed: elsewhere it is plain Tansu again).
    named = set(selected) - {"tansu_sessions"} if option else set()
    mark = metafunc.definition.get_closest_marker("broker_kinds")
    kinds = [k for k in selected if mark is None or k in mark.args]
    # Unvalidated here: the `broker` fixture reports unknown names per test.
    needs = {name for m in metafunc.definition.iter_markers("needs") for name in m.args}
    kinds = [k for k in kinds if k not in OPT_IN_KINDS or k in named
             or OPT_IN_KINDS[k] in needs or (mark is not None and k in mark.args)]
    metafunc.parametrize("broker", kinds, indirect=True, ids=kinds)


@pytest.fixture(scope="session")
def mock_cluster():
    """A librdkafka mock cluster of 3 brokers shared by the whole session."""
    from tests.brokers.mock_cluster import MockCluster

    cluster = MockCluster(3)
    yield cluster
    cluster.close()


@pytest.fixture
def mock_cluster_factory():
    """``make(broker_count=3) -> MockCluster``: fresh clusters, destroyed after the test."""
    from tests.brokers.mock_cluster import MockCluster

    made: list[MockCluster] = []

    def make(broker_count: int = 3) -> MockCluster:
        cluster = MockCluster(broker_count)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close()


@pytest.fixture(scope="session")
def tansu_broker():
    """One Tansu broker process shared by the session (errors if it cannot start)."""
    from tests.brokers.tansu import TansuBroker

    broker = TansuBroker()
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def fetch_sessions():
    """A Tansu of its own behind the KIP-227 fetch-session front, shared by the session
    (:class:`tests.brokers.fetch_sessions.TansuFetchSessions`; ``.front`` has the record)."""
    from tests.brokers.fetch_sessions import TansuFetchSessions

    broker = TansuFetchSessions()
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def apache_kafka():
    """Apache Kafka shared by the session: the running broker at KPROTO_KAFKA_BOOTSTRAP,
    else a distribution at KPROTO_KAFKA_HOME started as a child process, else Docker's
    image with KPROTO_KAFKA_DOCKER=1, else Kafka 4.4 from the test ground's pom (Maven);
    skips (with the reason) when there is none."""
    from tests.brokers.apache import start_apache_kafka

    broker, reason = start_apache_kafka()
    if broker is None:
        pytest.skip("apache_kafka: {}".format(reason))
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def apache_kafka_cluster():
    """Three Kafka 4.4 nodes from the test ground (:class:`tests.brokers.maven_kafka.MavenKafkaCluster`:
    a controller quorum of three combined nodes, replicated internal topics; ``kill(id)`` /
    ``restart(id)``), shared by the session; skips (with the reason) without mvn and java.
    Node ``i`` is in rack ``RACKS[i - 1]`` with Kafka's rack-aware replica selector
    (KIP-392): a consumer without ``client_rack`` still reads from the leaders. Besides
    PLAINTEXT (``bootstrap_servers``) it has the proxied client listeners ``EXTERNAL`` and
    ``MOVED`` (``proxies``, ``take_away``, ``bring_back``: addresses that can all go away
    while the cluster runs on); a test that takes one away brings it back."""
    from tests.brokers import maven
    from tests.brokers.maven_kafka import MavenKafkaCluster

    reason = maven.unavailable_reason()
    if reason is not None:
        pytest.skip("apache_kafka_cluster: {}".format(reason))
    cluster = MavenKafkaCluster(racks=MavenKafkaCluster.RACKS, proxied_listeners=("EXTERNAL", "MOVED"))
    yield cluster
    cluster.close()


@pytest.fixture(scope="session")
def java_peer():
    """The Java consumer of Kafka 4.4 as a peer (:class:`tests.brokers.java_peer.JavaPeerProgram`:
    ``start(mode, bootstrap, group, topics, ...)``), compiled with javac against the test
    ground when its source changed; every peer still running at the end is killed. Skips
    (with the reason) without mvn, java or javac."""
    from tests.brokers import java_peer as peers

    reason = peers.unavailable_reason()
    if reason is not None:
        pytest.skip("java_peer: {}".format(reason))
    program = peers.JavaPeerProgram()
    yield program
    program.close()


@pytest.fixture
def broker(request: pytest.FixtureRequest):
    """The test's broker: one parameter per kind (mock, tansu, apache_kafka; and
    tansu_sessions for tests that need ``fetch_sessions``).

    Kinds lacking a capability the test ``needs`` skip before any broker starts (for
    ``apache_kafka`` the table is a prior: the started broker's ApiVersions decide, so it
    may skip after starting). A test
    that needs ``fault_injection`` gets a fresh 3-broker mock cluster of its own (so the
    errors it injects cannot leak into other tests); otherwise brokers are session-wide.
    """
    kind = request.param
    needs = _needs(request.node)
    _skip_unless_offered(kind, needs, BROKER_CAPABILITIES[kind])
    if kind == "mock" and "fault_injection" in needs:
        from tests.brokers.mock_cluster import MockCluster

        cluster = MockCluster(3)
        request.addfinalizer(cluster.close)
        return cluster
    broker = request.getfixturevalue({"mock": "mock_cluster", "tansu": "tansu_broker",
                                      "apache_kafka": "apache_kafka",
                                      "tansu_sessions": "fetch_sessions"}[kind])
    _skip_unless_offered(kind, needs, broker.capabilities)
    return broker


def _skip_unless_offered(kind: str, needs: frozenset[str], offered: frozenset[str]) -> None:
    missing = needs - offered
    if missing:
        pytest.skip("{} lacks {}".format(
            kind, "; ".join("{} ({})".format(c, CAPABILITIES[c]) for c in sorted(missing))))
