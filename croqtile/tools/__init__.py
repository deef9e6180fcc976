"""What the command line and the documentation read and render besides compiling.

* ``pyscan``: Croqtile sources passed as string literals to ``croqtile.compile`` in Python
  files (``croqtile check file.py``), located in the file;
* ``code_blocks``: the fenced code blocks of a Markdown page (kernels published in
  tutorials, compiled as written);
* ``errors_doc``: the error-code reference rendered from the registry of codes and its
  examples (the documentation's page; ``croqtile explain`` prints one entry).
"""
