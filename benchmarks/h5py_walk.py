"""The least an inspection through h5py does: the floor `bench_inspect.py` measures.

    python benchmarks/h5py_walk.py FILE.h5

Imports h5py, visits every object with its header information (as h5stat does), opens
every dataset and asks for its layout, filters, shape, type size and storage size.
"""

import sys

import h5py

with h5py.File(sys.argv[1], "r") as f:
    names: list[bytes] = []
    h5py.h5o.visit(f.id, lambda n, info: names.append(n) if info.type == h5py.h5o.TYPE_DATASET else None, info=True)
    for name in names:
        ds = h5py.h5d.open(f.id, name)
        plist = ds.get_create_plist()
        plist.get_layout()
        for i in range(plist.get_nfilters()):
            plist.get_filter(i)
        ds.get_space().get_simple_extent_dims()
        ds.get_type().get_size()
        ds.get_storage_size()
    print(f"{len(names)} datasets")
