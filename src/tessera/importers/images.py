"""Importing a folder of image files as an image set (``tessera import images``).

Files are found recursively (by extension, sorted by path, so an import is repeatable). In
the ImageFolder layout (``SRC/<class>/<file>``) each image's label is its class folder's
index among the sorted class names, which the set records (:meth:`ImageColumns.classes`);
files directly in ``SRC`` get label -1. Files Pillow cannot read are skipped and reported,
not fatal: one broken file must not end an import of a million.

>>> import numpy as np, tempfile, pathlib
>>> from PIL import Image
>>> src = pathlib.Path(tempfile.mkdtemp())
>>> for cls in ("cat", "dog"):
...     (src / cls).mkdir()
...     Image.fromarray(np.zeros((40, 50, 3), np.uint8)).save(src / cls / "a.png")
>>> report = import_images(src, "memory://doc-import", size=(32, 32), fit="resize")
>>> report.images, report.classes, report.skipped
(2, ['cat', 'dog'], [])
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tessera.errors import InvalidArgumentError
from tessera.images.columns import ImageColumns
from tessera.images.frequency import FrequencyFormat
from tessera.images.header import HEADER_KEY
from tessera.images.inputs import Batch, SizeMismatchError, UnreadableImageError, prepare
from tessera.importers.report import ImportReport
from tessera.storage.blocking import open_store
from tessera.storage.bulk import delete_all

#: Extensions imported (lower case).
EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm")
#: ``progress(done, total)``: files handled so far, of all found.
Progress = Callable[[int, int], None]


def find_images(src: Path) -> tuple[list[Path], list[int], list[str] | None]:
    """The image files under ``src`` (sorted), their labels and the class names (None
    when no file lies in a subfolder)."""
    if not src.is_dir():
        raise InvalidArgumentError(f"{src} is not a folder of images")
    files = sorted(p for p in src.rglob("*") if p.suffix.lower() in EXTENSIONS and p.is_file())
    if not files:
        raise InvalidArgumentError(f"no image files ({', '.join(EXTENSIONS)}) under {src}")
    tops = [p.relative_to(src).parts for p in files]
    names = sorted({parts[0] for parts in tops if len(parts) > 1})
    if not names:
        return files, [-1] * len(files), None
    index = {name: i for i, name in enumerate(names)}
    return files, [index[parts[0]] if len(parts) > 1 else -1 for parts in tops], names


def import_images(source: Path | str, url: str, *, size: tuple[int, int] | None = None,
                  fit: str = "resize", group: int = 32, fmt: FrequencyFormat | None = None,
                  codec: str = "zstd:9", flush_images: int = 4096,
                  storage_options: dict[str, Any] | None = None,
                  progress: Progress | None = None, append: bool = False) -> ImportReport:
    """Store every image file under ``source`` in a new image set at ``url`` of ``size``
    (height, width), or with ``append=True`` add them to the set already there (its size,
    format and class names; a class folder it does not know is refused before anything is
    written). Memory stays bounded by ``flush_images`` images.

    An import that stores no image (every file refused, or an error before the first
    image) leaves no new set behind.
    """
    files, labels, names = find_images(Path(source))
    if append:
        cols = ImageColumns.open(url, "w", storage_options=storage_options, cache=None)
        labels = _relabelled(labels, names, cols.classes(), url)
    else:
        if size is None:
            raise InvalidArgumentError("import_images needs size=(height, width) for a new "
                                       "image set")
        cols = ImageColumns.create(url, size=size, fmt=fmt, group=group, codec=codec,
                                   fit=fit, storage_options=storage_options, cache=None)
    report = ImportReport(url=url, classes=names if not append else cols.classes())
    try:
        _store(cols, files, labels, fit, flush_images, progress, report)
    except BaseException:
        if not append:
            _discard(url, storage_options)
        raise
    if not report.images and not append:
        _discard(url, storage_options)
        return report
    if names is not None and not append:
        cols.set_classes(names)
    report.stored_bytes = int(sum(cols.coeffs.stored_bytes().values()))
    return report


def _store(cols: ImageColumns, files: list[Path], labels: list[int], fit: str,
           flush_images: int, progress: Progress | None, report: ImportReport) -> None:
    """Append the files in steps, noting each refused file in ``report``."""
    step = max(1, min(256, flush_images))
    with cols.writer(flush_images=flush_images) as writer:
        for lo in range(0, len(files), step):
            read: list[Batch] = []
            kept: list[int] = []
            for path, label in zip(files[lo:lo + step], labels[lo:lo + step], strict=True):
                try:
                    read.append(prepare([path], cols.size, fit))
                except InvalidArgumentError as err:
                    report.skipped.append((str(path), _reason(err)))
                    continue
                kept.append(label)
            if read:
                writer.append(Batch.concat(read), labels=np.array(kept))
                report.images += len(kept)
            if progress is not None:
                progress(min(lo + step, len(files)), len(files))


def _reason(err: InvalidArgumentError) -> str:
    """Why one file was refused, about the file (not "image 0" of a one-image batch)."""
    if isinstance(err, SizeMismatchError):
        return (f"{err.found[0]}x{err.found[1]}, the set holds {err.size[0]}x{err.size[1]} "
                f"and fit is {err.fit!r}")
    if isinstance(err, UnreadableImageError):
        return f"cannot be read: {err.reason}"
    return str(err)


def _discard(url: str, storage_options: dict[str, Any] | None) -> None:
    """Remove the set this import made (its header last)."""
    store = open_store(url, **(storage_options or {}))
    delete_all(store, store.list(), last=lambda key: key == HEADER_KEY)


def _relabelled(labels: list[int], names: list[str] | None, known: list[str] | None,
                url: str) -> list[int]:
    """Labels by the class names the set at ``url`` already has."""
    if names is None:
        return labels
    if known is None:
        raise InvalidArgumentError(f"{url} has no class names, the folder has class folders "
                                   f"{names[:5]}: append files without class folders, or "
                                   "import into a new set")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidArgumentError(f"class folders {unknown[:5]} are not among the classes of "
                                   f"{url} ({known[:10]}); nothing was imported")
    index = [known.index(n) for n in names]
    return [index[label] if label >= 0 else -1 for label in labels]
