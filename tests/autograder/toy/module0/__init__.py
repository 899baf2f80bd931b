"""Toy stage 0: scalar operators."""
