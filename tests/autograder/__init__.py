"""Tests of the course tooling (autograder/)."""
