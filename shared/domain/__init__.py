"""The domain (pure: no I/O library; imports only shared.domain): states, decisions, records, wire schema, errors."""
