"""Image columns (the Frequency-Store paper): images stored by frequency so that each reader
fetches only the diagonals of DCT coefficients it asks for: the frequency format
(:mod:`tessera.images.frequency`) and image sets stored by it on the array engine
(:mod:`tessera.images.columns`). Needs the ``images`` extra (scipy).
"""

from tessera.images.columns import ImageColumns
from tessera.images.frequency import FrequencyFormat, psnr

__all__ = ["FrequencyFormat", "ImageColumns", "psnr"]
