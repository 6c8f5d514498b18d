"""Generated messages on the wire against every broker."""
