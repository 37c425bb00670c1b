"""The pushdown server: a stateless service beside the store that reads tiles, verifies and
decodes them, and returns only the cells a read asked for (``tessera serve``).

- :mod:`tessera.server.protocol`: the versioned wire format (JSON request, binary response).
- :mod:`tessera.server.app`: the ASGI app (routes, auth, limits, metrics, logs).
- :mod:`tessera.server.service`: the read handler and its decoded-tile cache.
- :mod:`tessera.server.client`: the ``httpx`` client the read executor uses.
- :mod:`tessera.server.serve`: running it on uvicorn.

Starlette, uvicorn and httpx come with the ``server`` extra (``pip install tessera[server]``).
"""

from tessera.server.client import PushdownClient
from tessera.server.protocol import PROTOCOL_VERSION, Limits

__all__ = ["PROTOCOL_VERSION", "Limits", "PushdownClient"]
