"""Fuzzing of the whole compile pipeline: generators, a crash harness, the CI-sized run
(``test_fuzz.py``) and the long run (``python -m tests.fuzz.run_long``)."""
