"""The compiled decode of image columns, built with the package (``pip install``, ``make``).

Everything else is declared in ``pyproject.toml``. The extension is optional: where no C
compiler is found the install goes on without it and the images decode with numpy
(:mod:`tessera.images.kernel` says why the compiled decode is missing).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "tessera.images._kernel", ["src/tessera/images/_kernel.c"],
    extra_compile_args=["-O3", "-fno-math-errno", "-std=c11"],
    optional=True)])
