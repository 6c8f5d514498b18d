"""The Spark tests' shared peer: a standalone Spark cluster on loopback (a master and two
one-core workers, :class:`tests.integration.spark.standalone.StandaloneCluster`), started
by the first test that asks for it and shared by the session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark_cluster():
    pytest.importorskip("pyspark", reason="the Spark cluster needs pyspark: pip install 'kproto[spark]'")
    from tests.brokers import maven
    from tests.integration.spark.standalone import StandaloneCluster

    reason = maven.unavailable_reason()
    if reason is not None:
        pytest.skip("spark_cluster: {}".format(reason))
    cluster = StandaloneCluster(workers=2, cores=1, memory="1g").start()
    try:
        yield cluster
    finally:
        cluster.close()
