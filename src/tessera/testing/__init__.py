"""Testing kit: an S3 test server, an emulated cloud link and pytest fixtures.

Importable by tests and benchmarks; nothing here is needed at run time.
"""

from tessera.testing.link import EmulatedLink, LinkCounters
from tessera.testing.s3server import S3TestServer, S3TestServerError

__all__ = ["EmulatedLink", "LinkCounters", "S3TestServer", "S3TestServerError"]
