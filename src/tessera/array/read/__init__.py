"""The read path of the array engine, one module per job:

- :mod:`~tessera.array.read.tiles`: selection x fragments -> the tile reads
  (:class:`~tessera.format.tile.TileRead`, :class:`~tessera.format.tile.CellTileRead`);
- :mod:`~tessera.array.read.fetch`: fetching, verifying and decoding tiles as the plan says;
- :mod:`~tessera.array.read.local`: whole tiles of a local folder store on worker threads;
- :mod:`~tessera.array.read.scatter`: placing cells into the output, newest fragment winning;
- :mod:`~tessera.array.read.updates`: the per-handle index of many small updates;
- :mod:`~tessera.array.read.pushdown`: tiles sent to a pushdown server, with fallbacks;
- :mod:`~tessera.array.read.points`, :mod:`~tessera.array.read.sparse`: point selections and
  reads of sparse arrays;
- :mod:`~tessera.array.read.execute`: the executor that runs a plan's tile reads;
- :mod:`~tessera.array.read.report`: what a read did (:class:`ReadReport`).
"""
