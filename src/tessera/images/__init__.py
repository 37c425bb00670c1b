"""Image columns (the Frequency-Store paper): images stored by frequency so that each reader
fetches only the diagonals of DCT coefficients it asks for: the frequency format
(:mod:`tessera.images.frequency`) and image sets stored by it on the array engine
(:mod:`tessera.images.columns`), with what they accept (:mod:`tessera.images.inputs`) and
the per-process cache of fetched columns (:mod:`tessera.images.cache`). Needs the
``images`` extra (scipy).
"""

from tessera.images.cache import ColumnCache, shared_cache
from tessera.images.columns import ImageColumns, create_images, open_images
from tessera.images.frequency import FrequencyFormat, psnr
from tessera.images.writer import ImageWriter

__all__ = ["ColumnCache", "FrequencyFormat", "ImageColumns", "ImageWriter", "create_images",
           "open_images", "psnr",
           "shared_cache"]
