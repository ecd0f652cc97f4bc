"""Adapters that put personae inside other agent frameworks (each an optional extra).

``personae.integrations.pydantic_ai``, ``.openai_agents`` and ``.langchain``
import their framework; nothing else in personae imports this package.
"""

__all__: list[str] = []
