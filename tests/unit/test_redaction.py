"""Redaction of credentials: the key rule, free text and URLs, trees, and a property test."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from sweeper.record.redaction import (
    REDACTED,
    SECRET_KEY_PATTERN,
    is_secret_key,
    redact_mapping,
    redact_override,
    redact_overrides,
    redact_text,
    redact_tree,
    redact_yaml_config,
)

SECRET_KEYS = [
    "password", "db.password", "DB_PASSWORD", "PGPASSWORD", "passwd", "mysql.passwd", "MYSQL_PWD", "db_pwd",
    "passphrase", "ssh.key_passphrase", "secret", "client_secret", "clientSecret", "secrets", "jwt_secret",
    "token", "hf_token", "HF_TOKEN", "api_token", "auth_token", "github.token", "accessToken", "refresh_token",
    "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD", "HUGGING_FACE_HUB_TOKEN", "RAY_AUTH_TOKEN",
    "api_key", "apikey", "api-key", "apiKey", "WANDB_API_KEY", "OPENAI_API_KEY", "access_key", "secret_key",
    "private_key", "aws_secret_access_key", "AWSSecretAccessKey", "session_key", "account_key", "encryption_key",
    "credential", "credentials", "GOOGLE_APPLICATION_CREDENTIALS", "creds", "auth", "basic_auth", "http_auth",
    "oauth", "authorization", "sentry_dsn", "dsn", "connection_string", "AZURE_STORAGE_CONNECTION_STRING",
    "conn_str", "slack.webhook_url", "session_cookie",
    # a secret component anywhere hides the keys below it, as a tree redaction hides the subtree
    "credentials.username", "secrets.db", "auth.user", "ray.runtime_env.env_vars.WANDB_API_KEY",
]

INNOCENT_KEYS = [
    "tokenizer", "tokenizer.name", "max_tokens", "num_tokens", "vocab.tokens", "token_dropout", "tokens",
    "max_new_tokens", "special_tokens", "pad_token", "eos_token", "bos_token", "unk_token", "mask_token",
    "tokenizer.pad_token", "token_type_ids", "page_token", "author", "authors", "secretary", "secretstorage",
    "key", "sort_key", "primary_key", "public_key", "rng_key", "keys", "keyboard", "monkey", "pwd", "passes",
    "num_passes", "bypass", "auth_method", "auth_enabled", "authority", "tracking_uri", "mlflow.tracking_uri",
    "learning_rate", "model.hidden_size", "env.seed", "env.threads", "sweeper.pkg.numpy", "git.commit",
    "packages.sha256", "host", "hydra.sweeper.params", "aws_access_key_id", "token_file", "private_key_path",
    "cuda.version", "threads.numpy.openblas",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_credential_keys_are_secret(key: str) -> None:
    assert is_secret_key(key), key


@pytest.mark.parametrize("key", INNOCENT_KEYS)
def test_ordinary_keys_are_not(key: str) -> None:
    assert not is_secret_key(key), key


def test_the_table_is_large_enough_and_the_pattern_is_exposed() -> None:
    assert len(SECRET_KEYS) >= 20 and len(INNOCENT_KEYS) >= 15
    assert SECRET_KEY_PATTERN.fullmatch("hf_token") and not SECRET_KEY_PATTERN.fullmatch("tokenizer")


@pytest.mark.parametrize("text, expected", [
    ("db.password=hunter2", f"db.password={REDACTED}"),
    ("+api_key='abc'", f"+api_key={REDACTED}"),
    ("++hf_token=hf_x x=0.5", f"++hf_token={REDACTED} x=0.5"),
    ("x=1 db.password=a,b,c y=2", f"x=1 db.password={REDACTED} y=2"),  # a sweep over secrets: all of it
    ("--password=abc", f"--password={REDACTED}"),
    ("a=1,db.password=x", f"a=1,db.password={REDACTED}"),  # inside an innocent key's value
    ("https://h/x?user=u&token=abc", f"https://h/x?user=u&token={REDACTED}"),
    ("postgresql://user:pass@host/db", f"postgresql://user:{REDACTED}@host/db"),
    ("postgresql+psycopg2://user:pass@host:5432/db", f"postgresql+psycopg2://user:{REDACTED}@host:5432/db"),
    ("http://user:pass@host:5000", f"http://user:{REDACTED}@host:5000"),
    ("http://u:p@ss@host/x", f"http://u:{REDACTED}@host/x"),  # an unescaped @ in the password
    ("redis://:pw@host:6379", f"redis://:{REDACTED}@host:6379"),
    ("mlflow.tracking_uri=https://u:pw@mlflow.example.org",
     f"mlflow.tracking_uri=https://u:{REDACTED}@mlflow.example.org"),
    ('{"password": "abc", "x": 1}', f'{{"password": "{REDACTED}", "x": 1}}'),
    ("{'token': 'abc', 'lr': 0.1}", f"{{'token': '{REDACTED}', 'lr': 0.1}}"),
    ("db:\n  password: my secret\n  host: h\n", f"db:\n  password: {REDACTED}\n  host: h\n"),
    ("AccountName=a;AccountKey=abc==", f"AccountName=a;AccountKey={REDACTED}"),
    ("ghp_" + "a1" * 18, REDACTED),
    ("Authorization failed with hf_" + "b" * 34, f"Authorization failed with {REDACTED}"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", REDACTED),
])
def test_text_redaction(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected  # idempotent


@pytest.mark.parametrize("text", [
    "tokenizer=bert max_tokens=512 pad_token=<pad> x=0.25",
    "google-auth==2.40.0\nsecretstorage==3.3.3\noauthlib==3.2.2\n",  # a pip freeze
    "ssh://git@github.com/org/repo.git",  # a user name alone is no secret
    "sqlite:////tmp/mlruns.db http://127.0.0.1:5000",
    "author: Jane\nsecretary: no\nkeys: [a, b]\n",
    "",
])
def test_innocent_text_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


def test_overrides_are_redacted_argument_by_argument() -> None:
    args = ["--multirun", "hydra/sweeper=multiverse", "+db.password=two words", "~api_key", "x=interval(0,1)",
            "+creds.token==starts-with-equals", "mlflow.tracking_uri=postgresql://u:pw@h/db"]
    assert redact_overrides(args) == [
        "--multirun", "hydra/sweeper=multiverse", f"+db.password={REDACTED}", "~api_key", "x=interval(0,1)",
        f"+creds.token={REDACTED}", f"mlflow.tracking_uri=postgresql://u:{REDACTED}@h/db"]
    assert redact_override("plain") == "plain"


def test_trees_and_mappings() -> None:
    tree = {"db": {"host": "h", "password": "hunter2", "user": "u"}, "credentials": {"aws": {"id": "A", "key": "B"}},
            "lr": 0.1, "tokenizer": {"name": "bert", "pad_token": "<pad>"}, "unset_token": None,
            "uris": ["postgresql://u:pw@h/db", "+api_key=abc def"], "nested": [{"api_key": 1}]}
    red = redact_tree(tree)
    assert red == {"db": {"host": "h", "password": REDACTED, "user": "u"}, "credentials": REDACTED, "lr": 0.1,
                   "tokenizer": {"name": "bert", "pad_token": "<pad>"}, "unset_token": None,
                   "uris": [f"postgresql://u:{REDACTED}@h/db", f"+api_key={REDACTED}"],
                   "nested": [{"api_key": REDACTED}]}
    assert tree["db"]["password"] == "hunter2"  # the input is left alone
    flat = {"db.password": "hunter2", "db.port": 5432, "hf_token": 123, "x": 0.5, "note": "token=abc",
            "mlflow.tracking_uri": "http://u:p@h", "missing_secret": None}
    assert redact_mapping(flat) == {"db.password": REDACTED, "db.port": 5432, "hf_token": REDACTED, "x": 0.5,
                                    "note": f"token={REDACTED}", "mlflow.tracking_uri": f"http://u:{REDACTED}@h",
                                    "missing_secret": None}


def test_yaml_config_keeps_structure_and_hides_secrets() -> None:
    cfg = OmegaConf.create({
        "db": {"password": "hunter2-S1", "host": "h", "url": "${oc.env:HOME}"},
        "ray": {"runtime_env": {"env_vars": {"WANDB_API_KEY": "wb-S2", "OMP_NUM_THREADS": "1"}}},
        "mlflow": {"tracking_uri": "postgresql://mlflow:pg-S3@db:5432/mlflow"},
        "hydra": {"overrides": {"task": ["+db.password=hunter2-S1", "x=0.5"]}},
        "lr": 0.1,
    })
    text = redact_yaml_config(cfg)
    for secret in ("hunter2-S1", "wb-S2", "pg-S3"):
        assert secret not in text
    back = yaml.safe_load(text)
    assert back["db"] == {"password": REDACTED, "host": "h", "url": "${oc.env:HOME}"}  # not resolved
    assert back["ray"]["runtime_env"]["env_vars"] == {"WANDB_API_KEY": REDACTED, "OMP_NUM_THREADS": "1"}
    assert back["mlflow"]["tracking_uri"] == f"postgresql://mlflow:{REDACTED}@db:5432/mlflow"
    assert back["hydra"]["overrides"]["task"] == [f"+db.password={REDACTED}", "x=0.5"]
    assert cfg.db.password == "hunter2-S1"


# ---------------------------------------------------------------------- properties
_OTHER_OVERRIDES = st.lists(st.sampled_from([
    "x=0.5", "+model=small", "hydra.sweeper.num_trials=4", "tokenizer.name=bert", "max_tokens=128",
    "mlflow.tracking_uri=sqlite:///mlruns.db", "--multirun", "hydra/sweeper=multiverse", "y=interval(0,1)",
]), max_size=6)


@settings(max_examples=300, deadline=None)
@given(secret=st.text(min_size=1, max_size=40), before=_OTHER_OVERRIDES, after=_OTHER_OVERRIDES,
       prefix=st.sampled_from(["", "+", "++"]))
def test_a_secret_override_never_shows_in_the_redacted_command(secret: str, before: list[str], after: list[str],
                                                              prefix: str) -> None:
    args = [*before, f"{prefix}db.password={secret}", *after]
    text = " ".join(redact_overrides(args))
    # The redacted line does not depend on the secret at all ...
    assert text == " ".join(redact_overrides([*before, f"{prefix}db.password=other", *after]))
    # ... so the secret shows only where the rest of the line happens to contain it.
    if secret not in " ".join([*before, f"{prefix}db.password={REDACTED}", *after]):
        assert secret not in text


@settings(max_examples=300, deadline=None)
@given(secret=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
           lambda s: not any(c.isspace() for c in s) and not s.startswith("=")),
       before=_OTHER_OVERRIDES, after=_OTHER_OVERRIDES)
def test_a_secret_in_free_text_never_shows(secret: str, before: list[str], after: list[str]) -> None:
    # As free text (no argument boundaries) a value ends at whitespace; '==' reads as pip's name==version.
    text = redact_text(" ".join([*before, f"db.password={secret}", *after]))
    rest = " ".join([*before, f"db.password={REDACTED}", *after])
    if secret not in rest:
        assert secret not in text


@settings(max_examples=200, deadline=None)
@given(secret=st.text(min_size=1, max_size=30), user=st.from_regex(r"[a-z]{0,8}", fullmatch=True),
       scheme=st.sampled_from(["postgresql", "mysql+pymysql", "http", "https", "redis"]))
def test_a_url_password_never_shows(secret: str, user: str, scheme: str) -> None:
    secret = "".join(c for c in secret if not c.isspace() and c not in "/")  # what a URL password can hold
    if not secret:
        return
    url = f"{scheme}://{user}:{secret}@db.example.org:5432/records"
    expected = f"{scheme}://{user}:{REDACTED}@db.example.org:5432/records"
    if secret not in f"mlflow.tracking_uri={expected}":
        assert secret not in redact_text(f"mlflow.tracking_uri={url}")
        assert secret not in redact_tree({"uri": url})["uri"]
        assert secret not in " ".join(redact_overrides([f"mlflow.tracking_uri={url}"]))
