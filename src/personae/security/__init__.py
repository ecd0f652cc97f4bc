"""Security helpers: secret redaction (``redact``, no personae imports) and the
safety policy for untrusted files (``policy``: confined paths, allow-listed
environment)."""

from personae.security.redact import Redaction, redact, redact_text, redact_value

__all__ = ["Redaction", "redact", "redact_text", "redact_value"]
