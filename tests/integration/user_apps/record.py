"""A Hydra callback that records what each job returned, for the conformance suite's basic-launcher runs."""
import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

RETURNED = "returned.json"


class RecordReturn(Callback):
    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        value = job_return.return_value
        out = Path(config.hydra.runtime.output_dir) / RETURNED
        out.write_text(json.dumps(value if value is None or isinstance(value, (int, float, dict)) else repr(value)))
