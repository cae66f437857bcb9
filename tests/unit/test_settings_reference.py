"""docs/settings.md's tables, generated from the config dataclasses, lose no setting and no comment (issue 17).

The expected descriptions are read here from config.py's lines directly (a different reading
from the generator's tokenizer), so a comment the generator drops fails this test.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest

from hydra_plugins.multiverse_sweeper import _reference as reference
from hydra_plugins.multiverse_sweeper import config
from tests.conftest import REPO

CONFIG_LINES = Path(config.__file__).read_text(encoding="utf-8").splitlines()


def leaf_fields(cls: type, prefix: str) -> list[tuple[str, type, dataclasses.Field]]:
    """(dotted key, owning class, field) of every setting, nested dataclasses expanded."""
    out = []
    for f in dataclasses.fields(cls):
        if f.name.startswith("_"):
            continue
        if isinstance(f.type, type) and dataclasses.is_dataclass(f.type):
            out += leaf_fields(f.type, f"{prefix}.{f.name}")
        else:
            out.append((f"{prefix}.{f.name}", cls, f))
    return out


def comment_of(cls: type, name: str) -> str:
    """The comment lines right above the field in config.py, then its trailing comment, joined."""
    start = next(i for i, line in enumerate(CONFIG_LINES) if line.startswith(f"class {cls.__name__}"))
    line_no = next(i for i in range(start, len(CONFIG_LINES)) if re.match(rf"    {name}: ", CONFIG_LINES[i]))
    above = []
    i = line_no - 1
    while CONFIG_LINES[i].strip().startswith("#"):
        above.insert(0, CONFIG_LINES[i].strip().lstrip("#").strip())
        i -= 1
    code, _, trailing = CONFIG_LINES[line_no].partition("  # ")
    return " ".join([*above, trailing.strip()]).strip()


ALL = [(key, cls, f) for prefix, name in reference.SECTIONS
       for key, cls, f in leaf_fields(getattr(config, name), prefix)]


def test_every_block_of_the_config_is_documented() -> None:
    assert [name for _, name in reference.SECTIONS] == ["MultiverseSweeperConf", "RayConf", "MLflowConf", "EnvConf"]
    keys = {key for key, _, _ in ALL}
    assert {"hydra.sweeper.strategy", "ray.address", "ray.resources_per_trial.gpu", "mlflow.tracking_uri",
            "env.seed"} <= keys
    assert not any("_target_" in key for key in keys)  # Hydra's instantiation target is not a setting


@pytest.mark.parametrize(("key", "cls", "field"), ALL, ids=[key for key, _, _ in ALL])
def test_each_setting_appears_with_its_default_and_its_comment(key: str, cls: type, field: dataclasses.Field) -> None:
    prefix = next(p for p, _ in reference.SECTIONS if key.startswith(f"{p}."))
    (row,) = [r for r in reference.settings(prefix) if r.key == key]
    default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
    assert row.default == reference.yaml_value(default)
    comment = comment_of(cls, field.name)
    assert comment, f"{cls.__name__}.{field.name} has no comment in config.py"
    assert row.description == comment
    # ... and the page's Markdown holds the row.
    page = reference.settings_reference()
    line = next(line for line in page.splitlines() if line.startswith(f"| `{key}` |"))
    assert f"`{row.default}`".replace("|", "\\|") in line and comment.replace("|", "\\|") in line


def test_defaults_read_as_yaml() -> None:
    rows = {r.key: r for prefix, _ in reference.SECTIONS for r in reference.settings(prefix)}
    assert rows["hydra.sweeper.trial_timeout_s"].default == "null"
    assert rows["hydra.sweeper.trial_timeout_s"].type == "float or null"
    assert rows["hydra.sweeper.deterministic"].default == "false"
    assert rows["hydra.sweeper.params"].default == "{}"
    assert rows["ray.working_dir"].default == "auto"
    assert rows["ray.excludes"].default.startswith("[.git, .venv") and rows["ray.excludes"].type == "list of str"
    assert rows["mlflow.tracking_uri"].default == "sqlite:///mlruns.db"


def test_the_env_presets_table_says_what_each_preset_changes() -> None:
    table = reference.env_presets()
    assert "| `env=reproducible` | `env.threads=1`, `env.deterministic=true` |" in table
    assert "| `env=fast` | `env.cudnn_benchmark=true`, `env.matmul_precision=high` |" in table
    assert set(config.ENV_PRESETS) == set(re.findall(r"^\| `env=(\w+)`", table, flags=re.M))


def test_a_field_without_a_comment_fails_loudly() -> None:
    source = textwrap.dedent('''
        from dataclasses import dataclass

        @dataclass
        class Conf:
            documented: int = 1  # what it does
            # what this one does, on the line above
            above: int = 2
            silent: float = 0.5
    ''')
    namespace: dict = {"__name__": "reference_test_conf"}
    exec(compile(source, "conf.py", "exec", dont_inherit=True), namespace)
    with pytest.raises(reference.UndocumentedSetting, match=r"conf\.py:9: Conf\.silent \(x\.silent\) has no comment"):
        reference.describe(namespace["Conf"], source, "x", "conf.py")


def test_markers_are_filled_and_the_settings_page_has_one() -> None:
    assert "<!-- settings-reference -->" in (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    filled = reference.fill_markers("a\n\n<!-- settings-reference env -->\n\nb")
    assert "| `env.seed` | int | `0` |" in filled and "<!--" not in filled and "## `env`" not in filled
    assert reference.fill_markers("<!-- settings-reference -->").count("| key | type | default | meaning |") == 4
