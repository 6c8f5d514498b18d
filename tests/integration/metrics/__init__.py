"""Consumer and network metrics through the public consumer."""
