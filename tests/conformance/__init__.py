"""Conformance harnesses that read an external Croqtile checkout at run time.

Nothing from the upstream repository is stored here: every program, RUN line and
expected message is read from the path given on the command line.
"""
