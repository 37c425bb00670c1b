"""Integrations: PyTorch datasets, Dask arrays, an h5py-shaped facade and importers.

The public modules are :mod:`tessera.torch`, :mod:`tessera.dask` and :mod:`tessera.h5`;
the code behind them lives here.
"""
