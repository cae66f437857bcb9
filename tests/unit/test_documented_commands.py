"""Every shell command the documents show is run by a test, or listed with why it cannot run here (issue 16)."""

from __future__ import annotations

from tests.documented import NOT_RUN_HERE, block_commands, documented_commands, runs_by_tests


def test_every_documented_command_is_run_by_a_test_or_says_why_not() -> None:
    commands = documented_commands()
    shown = {c.text for c in commands}
    claimed = runs_by_tests()
    unaccounted = [f"{c.where}: {c.text}" for c in commands if c.text not in claimed and c.text not in NOT_RUN_HERE]
    assert not unaccounted, ("documented commands that no test runs (run one through tests.documented.documented, "
                             "or list it in NOT_RUN_HERE with the reason):\n" + "\n".join(unaccounted))
    both = sorted(set(claimed) & set(NOT_RUN_HERE))
    assert not both, f"run by a test and also listed as not run here: {both}"
    stale = sorted((set(claimed) | set(NOT_RUN_HERE)) - shown)
    assert not stale, f"no document shows these any more: {stale}"
    assert all(reason.strip() for reason in NOT_RUN_HERE.values())


def test_a_block_is_read_as_its_commands() -> None:
    block = ("make demo     # installs, then runs\n"
             "# a comment line\n\n"
             "python app.py --multirun \\\n    'lr=tag(log, interval(1e-5, 1e-1))'   # a comment\n"
             "echo '#not a comment'\n")
    assert [(c.text, c.where) for c in block_commands(block, "X.md", 10)] == [
        ("make demo", "X.md:10"),
        ("python app.py --multirun 'lr=tag(log, interval(1e-5, 1e-1))'", "X.md:13"),
        ("echo '#not a comment'", "X.md:15"),
    ]
