"""Image columns (the Frequency-Store paper): images stored by frequency so that each reader
fetches only the diagonals of DCT coefficients it asks for. This package holds, so far, the
frequency format (:mod:`tessera.images.frequency`); its storage on the array engine comes
next (issue 25). Needs the ``images`` extra (scipy, Pillow).
"""

from tessera.images.frequency import FrequencyFormat, psnr

__all__ = ["FrequencyFormat", "psnr"]
