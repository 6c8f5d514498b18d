"""kproto.codecs: compression round trips and other producers' formats."""
