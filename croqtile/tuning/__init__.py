"""Autotuning (``autotune="quick"`` or ``"full"``): options and ``#define`` values chosen
per shape on the first call, timed on the device, and cached on disk.

* ``tuner``: the search itself, its configurations (``Config``, ``Tunables``), the tuned
  function that dispatches per shape bucket, and the on-disk cache of choices;
* ``space``: the default search space of a program (its tile defines around their values,
  the launch options, stream-K where few tiles leave SMs idle);
* ``tile_defines``: which ``#define`` values of a program are tile extents, found by
  probing the compiled program.
"""
