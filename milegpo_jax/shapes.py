"""Shape buckets shared by every jitted entry point: sizes round up to powers of two so that new
batch shapes recompile rarely (prompt lengths use finer steps built on it: ``sampling/plan.py``
``length_bucket``)."""


def bucket_size(n: int, minimum: int = 1) -> int:
    """Smallest power of two >= max(n, minimum)."""
    n = max(n, minimum, 1)
    return 1 << (n - 1).bit_length()
