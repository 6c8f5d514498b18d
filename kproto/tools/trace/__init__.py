"""``python -m kproto trace``: a decoding proxy for any Kafka client, a packet-capture
reader, and a timeline page.

The top of the layering: it may use kproto.net/messages/protocol/records/errors, and nothing
in kproto imports it. Modules of one job each:

- :mod:`.frames` — sans-IO splitting of a byte stream into size-prefixed frames;
- :mod:`.decode` — requests and responses decoded with kproto.messages, as JSON trees;
- :mod:`.rewrite` — broker addresses in answers pointed at the proxy;
- :mod:`.summaries` — the fields that matter per API, error codes by name;
- :mod:`.exchange` — a request/response pair as the event every source reports;
- :mod:`.proxy` — the selector thread that forwards, decodes and reports;
- :mod:`.pcap` — pcap and pcapng files read as packets;
- :mod:`.packets` — a packet's link, IP and TCP headers down to the TCP segment;
- :mod:`.tcp_reassembly` — sans-IO TCP streams per connection (order, repeats, holes);
- :mod:`.capture` — a capture's Kafka conversations as the proxy's events;
- :mod:`.report` — one line per exchange, the summary on exit, JSON lines in and out;
- :mod:`.timeline` — a trace (wire and kproto events) turned into lanes, groups, sessions;
- :mod:`.html` — the self-contained page;
- :mod:`.cli` — the command line.
"""
