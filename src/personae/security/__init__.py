"""Security helpers with no dependencies on the rest of personae (secret redaction)."""

from personae.security.redact import Redaction, redact, redact_text, redact_value

__all__ = ["Redaction", "redact", "redact_text", "redact_value"]
