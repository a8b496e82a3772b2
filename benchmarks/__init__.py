"""Side-by-side benchmarks of posjax against the references a user would pick.

Run one with ``python -m benchmarks.<name>`` (e.g. ``python -m benchmarks.geometry --quick``).
"""
