"""``croqtile bench``: croqtile kernels checked against float64, then timed beside their
torch baselines in the same run.

This package owns the benchmark tool and its kernels, shipped as package data so that
``croqtile bench`` runs from an installed wheel:

* ``harness``: cases, correctness checks, interleaved timing, and the sweeps of the
  project's own kernels (square, llm, fp8, memory);
* ``attention``, ``linear``, ``sparse``: the sweeps of kernels written as a user would
  (attention; the epilogue and decode linear layers; the 2:4 sparse GEMM);
* ``spaces``: the autotuning candidates of the project's own kernels (``--autotune``);
* ``report``: the CSV, JSON and PNG files of a run, and its summary table;
* ``suite``: every sweep together, what the command line runs;
* ``models``, ``model_report``: the models sweep (whole ``transformers`` models in eager,
  compiled and croqtile forms; run only when named) and its files;
* ``moe``: the MoE sweep (one mixture-of-experts layer: ``fused_moe`` beside torch's
  grouped GEMM, a loop over the experts and a dense GEMM pair; run only when named);
* ``kernels/``: the Croqtile programs the sweeps compile (``*.co``, data only).

Maintainer scripts that go beyond these sweeps live in the repository's ``bench/`` folder.
"""
