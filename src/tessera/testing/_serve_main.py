"""Child-process entry point of :class:`tessera.testing.PushdownTestServer` (not a public API).

Runs ``tessera serve`` (the CLI, with the arguments given) and also stops it, gracefully,
when its stdin closes: the parent holds the other end, so a test process that dies without
stopping its server (killed, or exiting without leaving the ``with`` block) takes the server
with it instead of leaving it running beside later measurements.
"""

from __future__ import annotations

import os
import signal
import sys

from tessera.testing._process import on_stdin_close


def main(argv: list[str] | None = None) -> None:
    # uvicorn's own SIGTERM handler shuts the server down gracefully
    on_stdin_close(lambda: os.kill(os.getpid(), signal.SIGTERM))
    from tessera.cli.main import app

    app(args=sys.argv[1:] if argv is None else argv, prog_name="tessera")


if __name__ == "__main__":
    main()
