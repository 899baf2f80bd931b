"""Toy stage 1: vectors, built on stage 0."""
