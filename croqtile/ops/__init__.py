"""The PyTorch integration (architecture 4.1): compiled functions as ``torch.library``
operators.

* ``library``: registration of each function as ``torch.ops.NS.<name>``, its schema (what
  it writes) and its fake implementation (shapes from the declared sizes);
* ``traced``: what ``torch.compile`` sees of a call on CUDA: the launches of the Triton
  kernels themselves, or the opaque operator and the reason why.
"""
