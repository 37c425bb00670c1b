"""Types of the compiled decode (``_kernel.c``); :mod:`tessera.images.kernel` wraps it."""

from collections.abc import Sequence

import numpy as np

def decode_u8(parts: Sequence[np.ndarray], widths: Sequence[int], elem: int, channels: int,
              rows: int, cols: int, chans: Sequence[int], rs: Sequence[int],
              part_of: np.ndarray, offset: np.ndarray, q: float, mix: int,
              colour: np.ndarray, dct: np.ndarray, m: int, scaled: int, factor: float,
              level: float, out: np.ndarray, n0: int, n1: int, /) -> None: ...
