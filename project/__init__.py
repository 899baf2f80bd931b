"""Runnable training and visualisation built on the framework (not part of the graded
stages). ``python -m project`` runs the course's main job."""
