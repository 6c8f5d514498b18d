"""The test ground itself (tests/brokers/): fixtures, capabilities, the mock-cluster binding, the fetch-session front."""
