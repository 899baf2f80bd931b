"""Stage 4's tests."""
