"""Read methods and read modes: one module per method (``get``, ``range``, ``pushdown``),
registered here in the order they compete (:mod:`tessera.query.methods.registry`). A new
method is one module with its ``METHOD`` (a :class:`ReadMethod`) and ``MODES``, its name in
``BUILTIN`` below, and its tests; a plug-in calls :func:`register_method` and
:func:`register_mode` instead.
"""

from tessera.query.methods import get, pushdown, range
from tessera.query.methods.registry import ChoiceContext as ChoiceContext
from tessera.query.methods.registry import ReadMethod as ReadMethod
from tessera.query.methods.registry import ReadMode as ReadMode
from tessera.query.methods.registry import Requests as Requests
from tessera.query.methods.registry import methods as methods
from tessera.query.methods.registry import mode_names as mode_names
from tessera.query.methods.registry import read_method as read_method
from tessera.query.methods.registry import read_mode as read_mode
from tessera.query.methods.registry import register_method as register_method
from tessera.query.methods.registry import register_mode as register_mode

BUILTIN = (get, range, pushdown)
for _module in BUILTIN:
    register_method(_module.METHOD)
for _module in BUILTIN:
    for _mode in _module.MODES:
        register_mode(_mode)
