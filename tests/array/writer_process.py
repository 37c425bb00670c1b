"""A writer for the crash and concurrency tests, run as its own process.

    python writer_process.py URI WRITER_ID COUNT [key=value storage options...]

Writes COUNT fragments; fragment i of writer w fills row (w * COUNT + i) % rows of the array
with the value w * 1_000_000 + i, and prints ``committed <value> <fragment name>`` after each
write returns.
"""

from __future__ import annotations

import sys

import numpy as np

import tessera


def main() -> None:
    uri, writer, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    options = dict(a.split("=", 1) for a in sys.argv[4:])
    if "allow_http" in options:
        options["allow_http"] = options["allow_http"] == "true"
    arr = tessera.open_array(uri, mode="w", storage_options=options)
    rows, cols = arr.shape
    for i in range(count):
        value = writer * 1_000_000 + i
        row = (writer * count + i) % rows
        info = arr.write(np.full((1, cols), value, dtype=np.int64), origin=(row, 0))
        print(f"committed {value} {info.name}", flush=True)


if __name__ == "__main__":
    main()
