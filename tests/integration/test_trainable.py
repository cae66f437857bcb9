"""The trainable Tune registers is light: the trial context travels once per worker.

Tune unpickles the registered trainable in the driver for every trial it creates; a
context captured in it (the composed config, Hydra's state) made that 40 % of the driver's
time per trivial trial (bench/README.md, section 1).
"""

from __future__ import annotations

from types import SimpleNamespace

from sweeper.run.trial import _context, make_trainable


def test_the_registered_trainable_holds_a_reference_not_the_context(ray_local) -> None:
    context = SimpleNamespace(payload="x" * 2_000_000)  # stands in for a large composed config
    trainable = make_trainable(context)  # type: ignore[arg-type]  # a stand-in: only its size matters

    pickled = ray_local.cloudpickle.dumps(trainable)

    assert len(pickled) < 50_000, f"the trainable pickles to {len(pickled)} bytes: the context is inside it"
    assert ray_local.get(trainable.context_ref).payload == context.payload


def test_a_worker_fetches_the_context_once(ray_local) -> None:
    trainable = make_trainable(SimpleNamespace(payload=list(range(1000))))  # type: ignore[arg-type]  # a stand-in

    @ray_local.remote(num_cpus=0)
    def fetch_twice(refs: list) -> tuple[bool, list[int]]:
        first, second = _context(refs[0]), _context(refs[0])
        return first is second, first.payload[:3]

    same, head = ray_local.get(fetch_twice.remote([trainable.context_ref]))

    assert same, "the second trial in a worker fetched and unpickled the context again"
    assert head == [0, 1, 2]
