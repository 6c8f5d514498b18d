"""Protocol fuzzer for Kafka brokers: ``python -m kproto fuzz`` (docs/fuzzing.md).

One job per module: ``schema`` (the generated schema table as field specs), ``values``
(valid requests from the schema), ``layout`` (where each field lies in the bytes),
``mutators`` (field- and frame-level strategies), ``sequences`` (stateful strategies),
``oracles`` (verdicts on an exchange), ``brokerlog`` (the broker's log file as an oracle),
``coverage`` (JaCoCo's execution data from the broker's agent), ``target`` (the socket
shell), ``plan`` (what a run may send, safety, set-up), ``runner`` (the loop, restarts,
coverage feedback), ``minimise``, ``corpus`` (findings and reproducer files), ``replay``,
``report`` (JSON, text, HTML) and ``cli``. Library use::

    from kproto.tools.fuzz.runner import Fuzzer, FuzzConfig
    from kproto.tools.fuzz import report
    fuzzer = Fuzzer(FuzzConfig("127.0.0.1:9092", seconds=30, seed=1))
    fuzzer.run()
    print(report.to_text(report.build(fuzzer)))
"""
