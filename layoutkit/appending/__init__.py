"""Many source files written as one store, and grown: the words layoutkit uses for them.

- **The sources** (:class:`~layoutkit.storage.SourceSet`): the files a run is given, a
  list, a glob or ``--sources-from``, each one a *source* (a local path or an object in a
  bucket, :mod:`layoutkit.storage.sources`).
- **Combined**: the union of their shots, as one archive. Walked into one inventory
  (:mod:`layoutkit.hdf5.combined`), read as one archive
  (:class:`~layoutkit.readers.combined.CombinedArchive`, what ``layoutkit.open`` gives
  for many files, and what verify proves a store equal to), under one rule: a shot is
  taken once, and what lies outside the shots must be the same in every source.
- **Batches** (:mod:`.batches`): a set of more files than the driver should hold at once
  written a batch at a time: the first converted, each next appended.
- **The append** (:mod:`.append`): new sources joined to a store layoutkit wrote, writing
  only what is new, through the layout's ``append`` part, whose contract, a
  :class:`~layoutkit.merging.Merge`, lies below the layouts (:mod:`layoutkit.merging`);
  rows along a netCDF record dimension are grown in place (:mod:`.grow`).
- **The log** (:mod:`layoutkit.storage.log`): which sources a store was made from, one
  entry per run, outside its root.

This package holds the commands' side of it (batches, the append, the growth); the
parts the lower layers need live with them: the set with the storage, the walk with
the source side, the reader with the readers, the merge contract with the layout
contract.
"""
