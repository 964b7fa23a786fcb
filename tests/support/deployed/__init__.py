"""Modules of the library as a deployed stack ran them, kept verbatim (each file names the commit
it was copied from): a test reads with them what the code under test writes, as a stack rolled
back to that version would (``tests/unit/test_wire_rollback.py``, ``tests/unit/test_wire_writes.py``).
Never edited: a copy that followed today's code would prove nothing."""
