"""Tests against real protocol peers on 127.0.0.1 (librdkafka's mock cluster, Tansu, Apache Kafka), through the fixtures of tests/conftest.py. One folder per area."""
