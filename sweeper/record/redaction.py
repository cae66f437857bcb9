"""Credentials never reach the records: redaction of config keys, values and free text.

A sweep records its whole composed config (trial params, the parent run's
``multirun.yaml``, ``conditions.json``) and its command line (tags ``command`` and
``overrides``). A config that holds a database password, an API key or a token would put
it on a shared MLflow server, readable by everyone who can browse the experiment. This
module replaces such values by :data:`REDACTED` before anything is written;
:class:`sweeper.record.tracking.MLflowTracker` applies it to every param, tag and text artifact.

**The key rule** (:func:`is_secret_key`). A dotted key is a secret if *any* of its
components (split at ``.``, ``/`` and ``@``) is; any component, not only the last, because
a tree redaction hides a whole subtree (``credentials: {user: .., key: ..}``) and the
flattened view of the same config (``credentials.user``) must hide the same values. Each
component is normalised first: camelCase is split into words (``clientSecret`` ->
``client_secret``), ``-`` becomes ``_``, letters are lowercased. The normalised component
is a secret when :data:`SECRET_KEY_PATTERN` matches it in full, i.e. when

- a word contains ``password``, ``passwd`` or ``passphrase`` (``db_password``,
  ``PGPASSWORD``, ``MLFLOW_TRACKING_PASSWORD``), or a word ends in ``secret(s)`` or
  ``credential(s)``, or is ``creds`` (``client_secret``, ``clientsecret``,
  ``GOOGLE_APPLICATION_CREDENTIALS``; not ``secretary``);
- the last word is ``token`` (``token``, ``hf_token``, ``api_token``, ``auth_token``,
  ``github.token``, ``MLFLOW_TRACKING_TOKEN``, also glued: ``accesstoken``), except the
  tokenizer's own tokens (``pad_token``, ``bos_token``, ``eos_token``, ``unk_token``,
  ``mask_token``, ...) and a pagination ``page_token``; ``tokens``, ``tokenizer``,
  ``max_tokens`` and ``token_dropout`` never match, since ``token`` must be the last word;
- it ends in a credential kind of ``key``: ``api_key``/``apikey``/``api-key``,
  ``access_key``, ``secret_key``, ``private_key``, ``session_key``, ``client_key``,
  ``account_key``, ``encryption_key``, ``signing_key``, ``master_key``, ``ssh_key``, ...
  (``WANDB_API_KEY``, ``aws_secret_access_key``); a bare ``key``, ``sort_key``,
  ``public_key`` or JAX's ``rng_key`` is not a secret;
- the last word is ``auth``, ``oauth``, ``authorization``, ``bearer``, ``cookie(s)``,
  ``dsn`` or ``webhook`` (``basic_auth``, ``http_auth``, ``sentry_dsn``; not ``author``,
  ``auth_method``), or it ends in ``connection_string``/``conn_str``/``connstr`` or
  ``webhook_url``, or it is ``<something>_pwd`` (``MYSQL_PWD``; a bare ``pwd`` is the
  working directory).

Key names the rule misses (``pass``, ``pin``, an ``access_key_id``, a custom name) are
recorded as they are: rename such a key to end in ``_secret``/``_token``/``_password``.
(Reading the value with ``${oc.env:NAME}`` keeps it out of Hydra's local ``.hydra/`` files,
which hold the config unresolved, but not out of the trial's params, which are resolved.)

**The value rule**, for any value and any free text, whatever its key: a URL's password
(``postgresql://user:pass@host/db`` -> ``postgresql://user:***@host/db``, also the
``http(s)`` tracking URI of a server with basic auth), well-known token formats (GitHub
``ghp_``/``github_pat_``, Hugging Face ``hf_``, OpenAI/Anthropic ``sk-``, Slack ``xox?-``,
GitLab ``glpat-``, AWS ``AKIA``, JWTs, PEM private keys), and in free text (command lines,
overrides, YAML/JSON, an exception message) every ``key=value``, ``key: value`` or
``"key": value`` whose key is a secret by the key rule.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: What a secret value is replaced by.
REDACTED = "***"

_PASSWORD_WORD = r"[a-z0-9]*(?:password|passwd|passphrase)[a-z0-9]*"
_SECRET_WORD = r"[a-z0-9]*(?:secrets?|credentials?)|creds"
_TOKEN_KINDS = r"(?:api|auth|access|refresh|bearer|session|id|oauth|bot|user|app|personal|hf|github|gh|gitlab|slack)"
_NOT_SECRET_TOKENS = (r"pad|bos|eos|unk|sep|cls|mask|start|end|sos|eot|eom|special|image|video|audio|vision"
                      r"|new|num|max|min|n|first|last|default|placeholder|page")
_KEY_KINDS = (r"api|access|secret|private|session|client|account|encryption|decryption|signing|master|ssh"
              r"|auth|subscription|shared|storage|app|consumer|license|deploy|sas|service|admin|write|read")

#: Matched in full against one normalised key component (lowercase, ``_``-separated words);
#: see the module docstring for the rule and :func:`is_secret_key` for the normalisation.
SECRET_KEY_PATTERN = re.compile(
    rf"""
    (?!(?:.*_)?(?:{_NOT_SECRET_TOKENS})_token$)          # the tokenizer's pad_token, eos_token, ...
    (?:
        (?:.*_)?(?:{_PASSWORD_WORD})(?:_.*)?              # a word containing password/passwd/passphrase
      | (?:.*_)?(?:{_SECRET_WORD})(?:_.*)?                # a word ending in secret(s)/credential(s), creds
      | (?:.*_)?{_TOKEN_KINDS}?token                      # last word token (hf_token, accesstoken)
      | (?:.*_)?(?:{_KEY_KINDS})_?key                     # api_key, apikey, aws_secret_access_key
      | (?:.*_)?(?:auth|oauth|authorization|bearer|cookies?|dsn|webhook)   # last word
      | (?:.*_)?(?:connection_?string|conn_?str|webhook_url)
      | .+_pwd
    )
    """,
    re.IGNORECASE | re.VERBOSE,
)

_CAMEL_1 = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL_2 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")
_COMPONENT_SPLIT = re.compile(r"[./@]")


def _normalise(component: str) -> str:
    words = _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", component))
    return "_".join(w for w in _NON_WORD.split(words.lower()) if w)


@functools.lru_cache(maxsize=8192)
def is_secret_key(key: str) -> bool:
    """Whether a (dotted) config key names a credential: any component matches the key rule."""
    for component in _COMPONENT_SPLIT.split(str(key)):
        name = _normalise(component)
        if name and SECRET_KEY_PATTERN.fullmatch(name):
            return True
    return False


# ---------------------------------------------------------------------- free text
# scheme://user:password@host -> scheme://user:***@host (the password may hold '@'; '/' ends it)
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:)(?P<pw>[^\s/]*)(?P<at>@)")
_TOKEN_FORMATS = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
    r"|\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}|hf_[A-Za-z0-9]{30,}"
    r"|sk-[A-Za-z0-9_\-]{20,}|xox[abposr]-[A-Za-z0-9\-]{10,}|glpat-[A-Za-z0-9_\-]{20,}|AKIA[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,})",
    re.DOTALL,
)
_DQ = r'"(?:\\.|[^"\\\n])*"?'
_SQ = r"'(?:\\.|[^'\\\n])*'?"
# key=value, key: value, "key": value. The key may not continue a longer key (lookbehind);
# '=' is not part of '==' (pip's name==version); an unquoted key needs a blank after ':'
# (YAML; never a URL's scheme). After '=' the value runs to whitespace (a Hydra sweep
# a,b,c is one value); after ':' to the end of the line or a , } ].
_ASSIGNMENT = re.compile(
    rf"""
    (?<![A-Za-z0-9_.\-/@])
    (?P<q>["'])?(?P<key>[A-Za-z0-9_.\-/@]+)(?(q)(?P=q))
    (?:
        (?P<eq>[ \t]*(?<![=!<>])=(?!=)[ \t]*)(?P<v1>(?:{_DQ}|{_SQ}|[^\s"'])+)
      | (?P<colon>(?(q)[ \t]*:[ \t]*|:[ \t]+))(?P<v2>{_DQ}|{_SQ}|[^\s"',}}\]][^\n"',}}\]]*)
    )
    """,
    re.VERBOSE,
)


def _redact_assignments(text: str) -> str:
    # A loop, not re.sub: after an innocent key the scan goes on inside its value, so that
    # a=1,db.password=x or ?user=u&token=x are caught; after a secret one it skips the value.
    out: list[str] = []
    pos = 0
    while (m := _ASSIGNMENT.search(text, pos)) is not None:
        if not is_secret_key(m["key"]):
            sep_end = m.end("eq") if m["eq"] is not None else m.end("colon")
            out.append(text[pos:sep_end])
            pos = sep_end
            continue
        value = m["v1"] if m["v1"] is not None else m["v2"]
        quote = value[0] if m["v2"] is not None and value[:1] in ("'", '"') else ""
        value_start = m.start("v1") if m["v1"] is not None else m.start("v2")
        out.append(f"{text[pos:value_start]}{quote}{REDACTED}{quote}")
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def redact_text(text: str) -> str:
    """Free text (a command line, overrides, YAML/JSON, an error message) with its secrets replaced.

    ``db.password=hunter2`` -> ``db.password=***``, ``+api_key='abc'`` -> ``+api_key=***``,
    ``"token": "abc"`` -> ``"token": "***"``, ``postgresql://u:pw@h/db`` ->
    ``postgresql://u:***@h/db``, a ``ghp_...`` token -> ``***``. Idempotent.
    """
    if not text:
        return text
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{REDACTED if m['pw'] else ''}{m['at']}", text)
    text = _redact_assignments(text)
    return _TOKEN_FORMATS.sub(REDACTED, text)


_OVERRIDE = re.compile(r"(?P<key>[~+]{0,2}-{0,2}[A-Za-z0-9_.\-/@]+)=(?P<value>.*)", re.DOTALL)


def redact_override(arg: str) -> str:
    """One command-line argument: ``[+|++|~]key=value`` with a secret key keeps only its key.

    Exact where :func:`redact_text` must guess where a value ends: the whole value after
    the first ``=`` goes, blanks, quotes, commas and ``=`` included.
    """
    m = _OVERRIDE.fullmatch(arg)
    if m and is_secret_key(m["key"].strip().lstrip("+~-")):
        return f"{m['key']}={REDACTED}"
    return redact_text(arg)


def redact_overrides(args: Iterable[str]) -> list[str]:
    """Each argument of a command line or override list through :func:`redact_override`."""
    return [redact_override(str(a)) for a in args]


# ---------------------------------------------------------------------- structures
def redact_tree(obj: Any) -> Any:
    """A nested dict/list (or an OmegaConf container) with secret keys' values (whole subtrees) replaced.

    Keys may be dotted (a flattened config); strings anywhere go through
    :func:`redact_override` (a string ``key=value`` as a whole, such as an element of
    ``hydra.overrides.task``, else :func:`redact_text`). Returns plain dicts and lists; the
    input is not modified.
    """
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(obj, (DictConfig, ListConfig)):
        obj = OmegaConf.to_container(obj, resolve=False)
    if isinstance(obj, Mapping):
        return {k: (REDACTED if v is not None and is_secret_key(str(k)) else redact_tree(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_tree(v) for v in obj]
    if isinstance(obj, str):
        return redact_override(obj)
    return obj


def redact_mapping(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted key -> value (params, tags) with secret keys' values replaced and every value's URLs cleaned.

    ``None`` stays ``None`` (nothing to hide, and a tag of None is not written).
    """
    return {k: (REDACTED if v is not None and is_secret_key(str(k)) else redact_tree(v)) for k, v in flat.items()}


def redact_yaml_config(cfg: Any) -> str:
    """The YAML of a config (e.g. Hydra's composed config, for ``multirun.yaml``) with secret leaves replaced.

    Interpolations are not resolved (``${oc.env:HOME}`` stays as written); under a secret
    key an interpolation is replaced like any other value.
    """
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.create(redact_tree(cfg)))
