"""Testing kit: an S3 test server, a pushdown server process, an emulated cloud link and
pytest fixtures.

Importable by tests and benchmarks; nothing here is needed at run time.
"""

from tessera.testing.link import EmulatedLink, LinkCounters
from tessera.testing.pushdown import PushdownTestServer, PushdownTestServerError
from tessera.testing.s3server import S3TestServer, S3TestServerError

__all__ = ["EmulatedLink", "LinkCounters", "PushdownTestServer", "PushdownTestServerError",
           "S3TestServer", "S3TestServerError"]
