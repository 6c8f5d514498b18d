"""The share-group consumer (KIP-932) sans-IO: request managers, acknowledgements, share sessions."""
