"""KafkaShareConsumer (KIP-932) against real brokers: Apache Kafka's own share coordinator
(``test_kafka.py``), librdkafka's mock with fault injection (``test_mock_cluster.py``), the
API contract on both (``test_api_contract.py``); ``members.py`` holds what they share and
``share_member.py`` is a member run in a child process that a test kills."""
