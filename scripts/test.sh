#!/usr/bin/env bash
# Set up a virtualenv with the test extras (installed only when they changed: scripts/_venv.sh),
# type-check kproto/ and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh
ensure_venv 'test,all'
# mypy's settings are pyproject.toml's [tool.mypy]; any error fails the run.
.venv/bin/python -m mypy
# The test ground: Apache Kafka 4.4 and the Java consumer, resolved by Maven from
# tests/ground/pom.xml (Maven's local repository is the cache: a minute or two the first
# time, nothing after). Without mvn and java the [apache_kafka] tests skip with the reason.
if command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then
  .venv/bin/python -c 'from tests.brokers import maven; maven.classpath()'
else
  echo "warning: no mvn/java: the Apache Kafka 4.4 tests will skip" >&2
fi
# Three workers, a test file each at a time (a file's tests share its module fixtures; each
# worker starts the session brokers it needs): the suite spends most of its time waiting on
# brokers, group timers and JVM starts (a clean-clone run used ~12.5 CPU-minutes in ~19
# minutes of pytest on two workers), so three files at once fit 2 cores.
# KPROTO_TEST_WORKERS=0 runs in one process; an -n given here wins.
exec .venv/bin/python -m pytest -n "${KPROTO_TEST_WORKERS:-3}" --dist loadfile "$@"
