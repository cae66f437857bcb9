"""``--analysis NAME=VALUE`` of the calibration and demo-figures benches (decision 0084's measurements)."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

from bench.analysis_priors import analysis_overrides, apply


def _priors_seen() -> dict[str, object]:
    import sweeper.search.bounded as bounded
    import sweeper.search.hyper_vector as hyper_vector
    import sweeper.search.hyperposterior as hyperposterior

    return {"hyper_vector": (hyper_vector.SHAPE_PRIOR_SD, hyper_vector.CEILING_PRIOR, hyper_vector.NOISE_PRIOR),
            "hyperposterior": (hyperposterior.SHAPE_PRIOR_SD, hyperposterior.CEILING_PRIOR),
            "searcher": bounded.SHAPE_PRIOR_SD}


def test_values_are_json_and_a_prior_pair_becomes_a_tuple() -> None:
    assert analysis_overrides(["SHAPE_PRIOR_SD=1", "CEILING_PRIOR=[2, 1.5]"]) == {
        "SHAPE_PRIOR_SD": 1, "CEILING_PRIOR": (2, 1.5)}


def test_a_name_that_is_not_a_prior_is_refused_before_anything_runs() -> None:
    with pytest.raises(SystemExit, match=r"SHAPE_PRIOR: not a prior of the analysis GP; one of NOISE_PRIOR"):
        analysis_overrides(["SHAPE_PRIOR=1"])


def test_a_worker_process_gets_the_prior_where_the_sampler_reads_it_and_the_searcher_keeps_its_own() -> None:
    priors = analysis_overrides(["SHAPE_PRIOR_SD=1", "CEILING_PRIOR=[2, 1.5]"])
    context = multiprocessing.get_context("spawn")  # a clean interpreter: nothing set in this one
    with ProcessPoolExecutor(1, mp_context=context, initializer=apply, initargs=(priors,)) as pool:
        seen = pool.submit(_priors_seen).result()
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        shipped = pool.submit(_priors_seen).result()
    assert seen["hyper_vector"][:2] == seen["hyperposterior"] == (1, (2, 1.5))
    assert seen["hyper_vector"][2] == shipped["hyper_vector"][2]  # what was not named is as shipped
    assert shipped["hyperposterior"] == (2.0, (3.0, 1.5))
    assert seen["searcher"] == shipped["searcher"] == 1.0  # the searcher's own warp prior is another constant
