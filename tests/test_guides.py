"""Every Python block of the guides (docs/*.md) runs, page by page, in order, in one
namespace, in an empty folder: ``s3://bucket`` and ``s3://my-bucket`` on the S3 test
server (credentials through the ``AWS_*`` variables the guides name), the pushdown servers
the guides call ``http://10.0.0.5:8700`` and ``http://10.0.0.6:8700`` started on this
machine over that bucket.

A guide may set up what its examples assume in a block inside an HTML comment (run here,
not shown); a block that cannot run here is marked by a comment ``<!-- not run: why -->``
on the line before it, and listed by :func:`test_blocks_not_run_say_why` (one skip each,
with its reason, in pytest's summary).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("deltalake")
pytest.importorskip("torch")

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"(?:<!-- not run: (?P<why>.*?) -->\n)?```python\n(?P<code>.*?)```", re.S)


def page_blocks(page: Path) -> list[tuple[str, str | None, int]]:
    """``(code, why not run or None, line)`` of each Python block of ``page``."""
    text = page.read_text()
    return [(textwrap.dedent(m.group("code")), m.group("why"),
             text[:m.start()].count("\n") + 1) for m in BLOCK.finditer(text)]


PAGES = [p for p in sorted(DOCS.glob("*.md")) if page_blocks(p)]
NOT_RUN = [(f"{p.name}:{line}", why) for p in PAGES for _, why, line in page_blocks(p) if why]


@pytest.fixture(scope="module")
def servers(s3_server) -> Iterator[dict[str, str]]:
    from tessera.testing.pushdown import PushdownTestServer

    options = s3_server.storage_options()
    with PushdownTestServer(s3_server.url(), storage_options=options) as first, \
            PushdownTestServer(s3_server.url(), storage_options=options,
                               token=first.token) as second:
        yield {"http://10.0.0.5:8700": first.url, "http://10.0.0.6:8700": second.url,
               "token": first.token}


#: Runs a page's blocks, given as JSON ``[[code, line], ...]``, in order in one namespace in
#: a fresh interpreter (a page may register codecs or handlers: nothing of it may leak into
#: the other tests).
RUNNER = """
import json, sys
page, blocks = sys.argv[1], json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
for code, line in blocks:
    exec(compile("\\n" * line + code, page, "exec"), namespace)
"""


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_a_guide_runs(page: Path, tmp_path, s3_server, servers) -> None:
    options = s3_server.storage_options()
    env = dict(os.environ, AWS_ENDPOINT_URL=str(options["endpoint"]),
               AWS_REGION=str(options["region"]),
               AWS_ACCESS_KEY_ID=str(options["access_key_id"]),
               AWS_SECRET_ACCESS_KEY=str(options["secret_access_key"]), AWS_ALLOW_HTTP="true",
               TESSERA_PUSHDOWN_TOKEN=servers["token"])
    bucket = s3_server.unique_url(page.stem)
    blocks = []
    for code, why, line in page_blocks(page):
        if why:
            continue
        code = re.sub(r"s3://(my-)?bucket", bucket, code)
        for name, url in servers.items():
            if name.startswith("http"):
                code = code.replace(name, url)
        blocks.append([code, line])
    done = subprocess.run([sys.executable, "-c", RUNNER, str(page)], input=json.dumps(blocks),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.mark.parametrize(("block", "why"), NOT_RUN or [("none", "")],
                         ids=[b for b, _ in NOT_RUN] or ["none"])
def test_blocks_not_run_say_why(block: str, why: str) -> None:
    if block == "none":
        return
    assert len(why) > 10, f"{block}: say why it is not run"
    pytest.skip(f"{block} not run: {why}")
