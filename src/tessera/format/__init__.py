"""The on-disk format and its geometry, pure and free of I/O: array schemas, tile layout,
codecs (a registry), blocked tiles, checksums, selections and their decomposition into byte
ranges, and the stored-tile description (:mod:`tessera.format.tile`) that the planner, the
engine and the pushdown server share. The ground floor above errors and config: it imports
nothing else of Tessera.
"""
