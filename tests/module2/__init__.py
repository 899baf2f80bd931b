"""Stage 2's tests."""
