"""The runtime: from source text to callable functions, and from a call to a launch.

* ``driver``: compiling a program: preprocess, parse, check, lower, and ask the backends
  (``croqtile.backends.dispatch``) for each function's kernels;
* ``module``: the ``Module`` and ``Function`` objects users call, with their per-shape
  specialisation and warm-call paths;
* ``binding``: call arguments checked against a function's parameters (dtype, rank,
  dimensions, devices) and bound to its symbolic sizes;
* ``lru``: the bounded per-function caches and their size setting.
"""
