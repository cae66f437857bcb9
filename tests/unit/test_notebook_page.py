"""docs/notebook.md, run cell by cell as a Jupyter kernel runs it, on two sweeps whose numbers are known.

The page's ``python`` blocks are its cells. They run in order in one namespace, each cell's last bare
expression evaluated as its output (what a kernel shows), with only the first cell's store and experiment
names replaced, against a real MLflow SQLite store holding two random sweeps over ``x, y`` in [0, 1]:

- ``candidate``: ``acc = 0.9 - 0.1 ((x - 0.3)^2 + (y - 0.7)^2)``, 16 finished trials and one failed;
- ``baseline``: ``acc = 0.55 + 0.15 x y``, 16 trials: every score below the candidate's lowest, so the
  candidate's expected best is the higher at every budget.

The checks hold each output to a truth computed here: the expected-max curve against Dodge et al.'s eq. 8
summed directly over the trials, the map against the candidate's function, the Sobol indices against the
function's own (additive and symmetric about the centre of the square: half of the variance each), and
the comparison's leader against the scores' order. NOTE: docs/decisions/0057-notebook-page-cells.md
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import REPO
from tests.integration.conftest import STORE_TEMPLATE
from tests.sweep_records import record_sweep

PAGE = REPO / "docs" / "notebook.md"
_CELL = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SPACE = {"x": "interval(0, 1)", "y": "interval(0, 1)"}
N = 16


def candidate(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return 0.9 - 0.1 * ((x - 0.3) ** 2 + (y - 0.7) ** 2)


def baseline(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return 0.55 + 0.15 * x * y


def page_cells() -> list[str]:
    """The page's ``python`` blocks, in order."""
    return [m.group(1) for m in _CELL.finditer(PAGE.read_text(encoding="utf-8"))]


def run_cell(source: str, namespace: dict[str, Any]) -> Any:
    """Run a cell as IPython does: its statements, then the value of a last bare expression (None without one)."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body else None
    if not isinstance(last, ast.Expr):
        exec(compile(tree, PAGE.name, "exec"), namespace)
        return None
    exec(compile(ast.Module(tree.body[:-1], type_ignores=[]), PAGE.name, "exec"), namespace)
    return eval(compile(ast.Expression(last.value), PAGE.name, "eval"), namespace)


def dodge_curve(values: np.ndarray) -> np.ndarray:
    """Dodge et al. (2019) eq. 8, summed term by term: E[max of n draws with replacement], n = 1..N."""
    v, big_n = np.sort(values), values.size
    i = np.arange(1, big_n + 1)
    return np.array([np.sum(v * ((i / big_n) ** n - ((i - 1) / big_n) ** n)) for n in range(1, big_n + 1)])


@pytest.fixture
def store(tmp_path: Path) -> dict[str, Any]:
    """The two sweeps in a copy of the migrated empty store; their points and scores."""
    STORE_TEMPLATE.copy_to(tmp_path / "mlruns.db")
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    rng = np.random.default_rng(0)
    p, q = rng.random((N, 2)), rng.random((N, 2))
    scores = candidate(p[:, 0], p[:, 1])
    run = record_sweep(uri, "candidate", scores.tolist(), points=[{"x": a, "y": b} for a, b in p.tolist()],
                       space=SPACE, failed=1)
    record_sweep(uri, "baseline", baseline(q[:, 0], q[:, 1]).tolist(),
                 points=[{"x": a, "y": b} for a, b in q.tolist()], space=SPACE)
    return {"uri": uri, "run": run, "points": p, "scores": scores}


def test_every_cell_of_the_notebook_page_runs_and_shows_what_the_page_says(
        store: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.figure import Figure

    cells = page_cells()
    settings = [s for s in ast.parse(cells[0]).body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant)]
    assert [ast.unparse(s.targets[0]) for s in settings] == ["TRACKING_URI", "EXPERIMENT", "OTHER_EXPERIMENT", "OUT"]
    assert len(settings) == len(ast.parse(cells[0]).body), f"the first cell sets the store and names only: {cells[0]}"
    monkeypatch.chdir(tmp_path)  # OUT is relative: the cells write under the test's folder
    namespace: dict[str, Any] = {"__name__": "__main__"}
    outputs = [run_cell(cells[0], namespace)]
    namespace.update(TRACKING_URI=store["uri"], EXPERIMENT="candidate", OTHER_EXPERIMENT="baseline")
    outputs += [run_cell(cell, namespace) for cell in cells[1:]]
    printed = capsys.readouterr().out
    assert len(outputs) == 12, "the page's cells changed: update this test's checks"
    (_, _, loaded, best, errors, curve_figure, curve_table, sensitivity, map_mean, map_sd, compare_figure,
     standings) = outputs

    for i, output in enumerate(outputs):  # every figure renders, as Jupyter's inline backend renders it
        if isinstance(output, Figure):
            output.savefig(tmp_path / f"cell-{i}.png", dpi=30)
            assert (tmp_path / f"cell-{i}.png").stat().st_size > 1_000
    assert plt.get_fignums() == []  # no pyplot figure left open

    # One sweep: what it was, its best trials, its failure.
    assert namespace["sweep"].parent_run_id == store["run"]
    assert f"sweep {store['run']} ended" in printed
    assert loaded == {"strategy": "random", "metric": "acc", "mode": "max", "trials": N + 1, "finished": N,
                      "failed": 1}
    scores, points = store["scores"], store["points"]
    order = np.argsort(-scores)[:10]
    assert isinstance(best, pd.DataFrame) and list(best.columns) == ["index", "param.x", "param.y", "metric.acc",
                                                                      "duration_s"]
    assert np.allclose(best["metric.acc"], scores[order]) and np.array_equal(best["index"], order)
    assert np.allclose(best[["param.x", "param.y"]].to_numpy(), points[order])
    assert errors.to_dict() == {"ValueError: diverged": 1}

    # Its expected-max curve: Dodge et al.'s eq. 8 over the finished trials, drawn and tabulated.
    truth = dodge_curve(scores)
    assert isinstance(curve_figure, Figure)
    assert np.allclose(curve_figure.axes[0].lines[0].get_ydata(), truth, rtol=0, atol=1e-12)
    assert list(curve_table.index) == [1, 2, 5, 10, N]
    assert np.allclose(curve_table["expected best"], truth[[0, 1, 4, 9, N - 1]], rtol=0, atol=1e-12)
    assert np.isclose(curve_table["expected best"].iloc[0], scores.mean())
    assert namespace["report"].markdown.is_file()

    # Its multiverse map: the GP's mean over x and y against the candidate's function, its sd, its files.
    assert "effect (0 of 19 shuffles fit as well; p = 0.05)" in printed
    assert namespace["multiverse"].summary["effect"]["caution"] is None
    assert list(sensitivity["name"]) == ["x", "y"]  # each choice carries half the variance, with no interaction
    assert np.allclose(sensitivity["main"], 0.5, atol=0.1) and np.allclose(sensitivity["total"], sensitivity["main"],
                                                                            atol=0.05)
    cm = namespace["view"].contour
    assert isinstance(map_mean, Figure) and isinstance(map_sd, Figure) and (cm.x_dim, cm.y_dim) == ("x", "y")
    gx, gy = np.meshgrid(cm.x_values, cm.y_values)
    assert cm.mean[""].shape == (40, 40) and np.abs(cm.mean[""] - candidate(gx, gy)).max() < 0.015  # range 0.1
    top = np.unravel_index(np.argmax(cm.mean[""]), gx.shape)
    assert np.hypot(gx[top] - 0.3, gy[top] - 0.7) < 0.1  # the optimum where it is
    assert np.all(np.isfinite(cm.sd[""])) and cm.sd[""].min() > 0
    folder = namespace["multiverse"].out_dir
    assert {"map_mean_x_y.png", "map_sd_x_y.png", "map_x_y.csv", "sensitivity.csv", "multiverse.md"} <= {
        p.name for p in folder.iterdir()}
    assert np.all(np.isfinite(pd.read_csv(folder / "map_x_y.csv")[["mean", "sd", "low", "high"]].to_numpy()))

    # Two sweeps compared: the candidate, whose every score beats the baseline's, is ahead at every budget.
    assert isinstance(compare_figure, Figure) and len(compare_figure.axes[0].lines) == 2
    assert list(standings.index) == list(range(1, N + 1))
    assert set(standings["leader"]) == {"candidate"} and set(standings["verdict"]) == {"ahead"}
    assert (standings["P(best)"] == 1.0).all()
    assert f"n = 1–{N}: candidate ahead (P(best) = 1.00)" in printed
    assert (namespace["written"].out_dir / "compare.csv").is_file()
