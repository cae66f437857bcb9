"""Benchmarks of the multiverse sweeper: ``python -m bench {overhead,acquisition,all}``.

Each benchmark prints a Markdown table and writes it, with the raw numbers as JSON, to
``bench/results/<name>.md`` and ``bench/results/<name>.json`` (git-ignored). See
``bench/README.md`` for the tables of the last full run.
"""
