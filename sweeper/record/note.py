"""The sweep's description in MLflow (``mlflow.note.content``): what ran, what won, where the results are.

The MLflow UI shows a run's note at the top of its page, so the sweep's run says, without a
click: the command that ran the sweep, its best trial (index, params, value), the trial count,
and the report and maps once ``sweeper report`` / ``sweeper multiverse`` have logged them.

The note is rendered from the run's own records (:func:`note_from_run`), never edited in
place: the sweep writes the tags it rests on when it closes (``sweeper.best_trial``,
``sweeper.best_params``, the ``best_<metric>`` and ``num_*`` metrics), each analysis command adds
an ``sweeper.output.<artifact folder>`` tag, and the note is rendered again from all of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: MLflow's tag holding a run's description (Markdown), shown at the top of its page in the UI.
NOTE_TAG = "mlflow.note.content"
#: Prefix of the tags naming an output logged to the sweep's run: ``output.<artifact folder>``
#: (``sweeper.`` is added by the tracker); the value is JSON ``{"file": ..., "local": ...}``.
OUTPUT_TAG = "output."


def output_tag(artifact_dir: str, main_file: str, local_dir: str | None) -> dict[str, str]:
    """The tag recording an output: its artifact folder, the file to open first, the local folder it was written to."""
    return {f"{OUTPUT_TAG}{artifact_dir}": json.dumps({"file": main_file, "local": local_dir})}


def render_note(*, command: str | None, metric: str, mode: str | None, best: Mapping[str, Any] | None,
                counts: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any]], artifact_uri: str | None) -> str:
    """The note's Markdown.

    Args:
        command: The command that ran the sweep.
        metric: The sweep's metric; ``mode``: ``max`` or ``min``.
        best: ``{"index", "params", "value"}`` of the best trial, or None (none finished).
        counts: ``num_trials``, ``num_finished``, ``num_failed`` (those known).
        outputs: Artifact folder -> ``{"file", "local"}``, the outputs logged so far.
        artifact_uri: The run's artifact location, to give each output's full address.
    """
    lines = ["**Sweep run** (multiverse-sweeper).", ""]
    if command:
        lines += ["Command:", "", f"    {command}", ""]
    n = counts.get("num_trials")
    if n is not None:
        lines.append(f"- Trials: {int(n)} ({int(counts.get('num_finished', 0))} finished, "
                     f"{int(counts.get('num_failed', 0))} failed).")
    if best is not None:
        params = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["params"].items())
        lines.append(f"- Best trial: #{best['index']} ({params}): {metric} = {best['value']:.6g}"
                     f"{f' ({mode})' if mode else ''}.")
    else:
        lines.append(f"- Best trial: none (no trial finished with {metric}).")
    if outputs:
        lines += ["", "Results (artifacts of this run):", ""]
        for folder, output in sorted(outputs.items()):
            lines.append(f"- `{folder}/{output['file']}`"
                         + (f" (at `{artifact_uri.rstrip('/')}/{folder}/`)" if artifact_uri else "")
                         + (f", written to `{output['local']}`" if output.get("local") else ""))
    return "\n".join(lines) + "\n"


def note_from_run(tags: Mapping[str, str], params: Mapping[str, str], metrics: Mapping[str, float],
                  artifact_uri: str | None) -> str:
    """The note of a sweep's run, rendered from the run's tags, params and metrics as MLflow holds them."""
    metric = params.get("metric", "")
    best = None
    if "sweeper.best_trial" in tags and f"best_{metric}" in metrics:
        best = {"index": tags["sweeper.best_trial"], "params": json.loads(tags.get("sweeper.best_params", "{}")),
                "value": metrics[f"best_{metric}"]}
    prefix = f"sweeper.{OUTPUT_TAG}"
    outputs = {k[len(prefix):]: json.loads(v) for k, v in tags.items() if k.startswith(prefix)}
    counts = {k: metrics[k] for k in ("num_trials", "num_finished", "num_failed") if k in metrics}
    return render_note(command=tags.get("sweeper.command"), metric=metric, mode=params.get("mode"), best=best,
                       counts=counts, outputs=outputs, artifact_uri=artifact_uri)
