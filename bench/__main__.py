"""``python -m bench NAME``: run one benchmark (or ``all``) and write ``bench/results/``."""

from __future__ import annotations

import argparse
import importlib

#: name -> (module, what it measures); each module has add_arguments(parser) and run(args).
BENCHMARKS = {
    "overhead": ("bench.overhead", "orchestration overhead per trial vs plain Ray Tune (issue 8.1)"),
    "startup": ("bench.startup", "time to the first trial vs ray.init alone; a 16-trial sweep vs the basic sweeper"),
    "acquisition": ("bench.acquisition", "GP refit and IVR latency vs Emukit and BoTorch (issue 8.2)"),
    "efficiency": ("bench.efficiency", "map error after n trials: ours vs sobol, random, ucb, Emukit, BoTorch (8.3)"),
    "scale": ("bench.scale", "suggestion time and map quality from n = 100 to 5,000 (issue 8.4)"),
    "analysis": ("bench.analysis_speed", "expected_max on 10^6 values, sweeper report on 10,000 trials (8.5)"),
    "sampler": ("bench.sampler_speed", "the analysis sampler's log posterior and mixture vs the composition before"),
    "fidelity": ("bench.fidelity", "report curve and multiverse maps against the truth of real ML maps (issue 15)"),
    "demo-figures": ("bench.demo_figures", "issue 15's figures of the demo's map over many seeds of its sweep"),
    "calibration": ("bench.calibration", "predictive-check verdicts against the truth of real ML maps (issue 32)"),
    "effect": ("bench.effect_test", "the multiverse's effect test where there is no effect, and on real maps"),
    "interaction": ("bench.interaction_test", "interaction verdicts (eq. 8) against additive and interacting truths"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = parser.add_subparsers(dest="name", required=True)
    for name, (module, help_text) in BENCHMARKS.items():
        importlib.import_module(module).add_arguments(sub.add_parser(name, help=help_text))
    every = sub.add_parser("all", help="every benchmark with its defaults (or --smoke sizes), one after another")
    every.add_argument("--smoke", action="store_true", help="small sizes: a check that everything runs")
    args = parser.parse_args(argv)
    if args.name != "all":
        importlib.import_module(BENCHMARKS[args.name][0]).run(args)
        return
    for module_name, _ in BENCHMARKS.values():
        module = importlib.import_module(module_name)
        p = argparse.ArgumentParser()
        module.add_arguments(p)
        module.run(p.parse_args(["--smoke"] if args.smoke else []))


if __name__ == "__main__":
    main()
