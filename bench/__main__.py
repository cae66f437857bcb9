"""``python -m bench {overhead,acquisition,all}``: run benchmarks, write ``bench/results/``."""

from __future__ import annotations

import argparse

from bench import acquisition, overhead


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = parser.add_subparsers(dest="name", required=True)
    overhead.add_arguments(sub.add_parser("overhead", help="orchestration overhead per trial vs plain Ray Tune"))
    acquisition.add_arguments(sub.add_parser("acquisition", help="GP fit and IVR latency vs Emukit"))
    every = sub.add_parser("all", help="every benchmark with its defaults (or --smoke sizes)")
    every.add_argument("--smoke", action="store_true", help="small sizes: a check that everything runs")
    args = parser.parse_args(argv)
    if args.name == "overhead":
        overhead.run(args)
    elif args.name == "acquisition":
        acquisition.run(args)
    else:
        for module in (overhead, acquisition):
            p = argparse.ArgumentParser()
            module.add_arguments(p)
            module.run(p.parse_args(["--smoke"] if args.smoke else []))


if __name__ == "__main__":
    main()
