"""Hydra's entry point for the multiverse sweeper (``hydra/sweeper=multiverse``)."""
