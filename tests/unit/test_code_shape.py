"""The shape the library keeps (issue 33): short modules and functions, and every lint exception explained.

ruff and mypy (``make lint``) check the rules; these check what they cannot: the sizes an expert can read in one
sitting, and that a ``noqa`` or ``type: ignore`` says why the rule does not apply there.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = sorted([*(ROOT / "sweeper").rglob("*.py"), *(ROOT / "hydra_plugins").rglob("*.py")])
LINTED = sorted(p for folder in ("sweeper", "hydra_plugins", "experiments", "bench", "tests")
                for p in (ROOT / folder).rglob("*.py"))
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
#: After the ``#``: ``noqa: CODE - reason`` or ``type: ignore[code]  # reason``; the reason is any words after the code.
EXCEPTION = re.compile(r"#\s*(noqa: ?[A-Z]+[0-9]+(?:, ?[A-Z]+[0-9]+)*|type: ?ignore\[[a-z-, ]+\])(?P<rest>.*)$")


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_files_exist() -> None:
    assert len(LIBRARY) > 50 and len(LINTED) > len(LIBRARY)


@pytest.mark.parametrize("path", LIBRARY, ids=_name)
def test_module_is_at_most_400_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{_name(path)} has {lines} lines; split it by responsibility"


@pytest.mark.parametrize("path", LIBRARY, ids=_name)
def test_functions_are_at_most_80_lines(path: Path) -> None:
    tree = ast.parse(path.read_text())
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
            for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{_name(path)}: {', '.join(long)}"


@pytest.mark.parametrize("path", LINTED, ids=_name)
def test_every_lint_exception_gives_its_reason(path: Path) -> None:
    bare = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for match in EXCEPTION.finditer(line):
            reason = re.sub(r"^[\s#:\-–—]*", "", match["rest"])
            if not re.search(r"[a-z]{3}", EXCEPTION.sub("", reason) if EXCEPTION.search(reason) else reason):
                bare.append(f"line {number}: {line.strip()}")
    assert not bare, f"{_name(path)}: a noqa or type: ignore without its reason:\n" + "\n".join(bare)


def test_the_check_of_reasons_can_fail(tmp_path: Path) -> None:
    """A bare exception is caught and an explained one passes (the pattern above is not vacuous)."""
    assert EXCEPTION.search("x = f()  # type: ignore[attr-defined]")["rest"].strip() == ""
    assert "reason" in EXCEPTION.search("x = f()  # noqa: SLF001 - the reason")["rest"]
