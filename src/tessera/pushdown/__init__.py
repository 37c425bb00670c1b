"""The pushdown wire, shared by the caller (the array engine, the profiler) and the answerer
(``tessera serve``): the framing (:mod:`tessera.pushdown.framing`: version, limits, the
binary response, the checks items are built from), the read items
(:mod:`tessera.pushdown.read_items`) and the client (:mod:`tessera.pushdown.client`). Neither
the engine nor the server imports the other for it.
"""
