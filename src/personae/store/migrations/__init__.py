"""Numbered SQL migrations (NNNN_name.sql), one owner per file."""

__all__: list[str] = []
