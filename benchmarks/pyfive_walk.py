"""A pure-Python reading of the same metadata: the reference for "why not our own reader".

    python benchmarks/pyfive_walk.py FILE.h5      (needs: pip install pyfive)

pyfive (NCAS-CMS) parses the HDF5 format in Python, without libhdf5. This walks every
group and dataset and asks each dataset for its shape, dtype, chunks, compression and
attributes: less than ``benchmarks/h5py_walk.py`` asks (no storage size, no chunk index).
"""

import sys

import pyfive


def walk(group: "pyfive.Group") -> int:
    count = 0
    for name in group:
        obj = group[name]
        if isinstance(obj, pyfive.Group):
            count += walk(obj)
        else:
            obj.shape, obj.dtype, obj.chunks, obj.compression, dict(obj.attrs)
            count += 1
    return count


print(f"{walk(pyfive.File(sys.argv[1]))} datasets")
