"""The pushdown server: a stateless service beside the store that reads tiles, verifies and
decodes them, and returns only the cells a read asked for (``tessera serve``).

- :mod:`tessera.server.app`: the ASGI app (routes, auth, limits, metrics, logs).
- :mod:`tessera.server.handlers`: the registry of its POST routes (``/v1/read``, ...).
- :mod:`tessera.server.service`: the read handler's service and its decoded-tile cache.
- :mod:`tessera.server.serve`: running it on uvicorn.

The wire it speaks (framing, read items) and its client are :mod:`tessera.pushdown`'s,
shared with the array engine. Starlette, uvicorn and httpx come with the ``server`` extra
(``pip install tessera[server]``).
"""

from tessera.pushdown.client import PushdownClient
from tessera.pushdown.framing import PROTOCOL_VERSION, Limits

__all__ = ["PROTOCOL_VERSION", "Limits", "PushdownClient"]
