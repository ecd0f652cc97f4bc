"""``personae ui``: a local, read-only web viewer for runs, model calls, budgets and chains.

Server-rendered HTML over the project store (a small Starlette app served by
uvicorn on 127.0.0.1; extra ``personae[ui]``). Nothing here writes to the
store or the project. Importing this package imports nothing else; the app
lives in :mod:`personae.ui.app` and the server in :mod:`personae.ui.server`.
"""

__all__: list[str] = []
