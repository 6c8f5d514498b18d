"""Command line: ``python -m kproto consume | trace | fuzz``; dispatches to the tools.

Each command is a tool of :mod:`kproto.tools` with its own command line: ``consume``
(:mod:`kproto.tools.consume`), ``trace`` (:mod:`kproto.tools.trace.cli`) and ``fuzz``
(:mod:`kproto.tools.fuzz.cli`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

COMMANDS = {
    "consume": "print the records of a topic, as kafka-console-consumer "
               "(python -m kproto consume -h)",
    "trace": "decode Kafka traffic: a proxy for any client, or a packet capture "
             "(python -m kproto trace -h)",
    "fuzz": "fuzz a broker at the protocol level (python -m kproto fuzz -h)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kproto",
                                     description="kproto: a pure-Python Kafka consumer")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in COMMANDS.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The chosen tool's exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else None
    if command == "consume":
        from kproto.tools.consume import main as consume_main

        return consume_main(argv[1:])
    if command == "trace":
        from kproto.tools.trace.cli import main as trace_main

        return trace_main(argv[1:])
    if command == "fuzz":
        from kproto.tools.fuzz.cli import main as fuzz_main

        return fuzz_main(argv[1:])
    build_parser().parse_args(argv)  # prints the usage and exits (2; 0 for -h)
    return 2


if __name__ == "__main__":
    sys.exit(main())
