"""The files under cluster/: launcher YAML, KubeRay manifests, compose file and shell scripts.

Nothing here starts a cluster or reaches a network. The Slurm script runs under bash with fake
``scontrol``, ``srun``, ``ray``, ``hostname`` and ``nvidia-smi`` executables (and a fake ``ray``
Python module for its node count) first on PATH; each logs what it was asked to do.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

CLUSTER = REPO / "cluster"
SBATCH = CLUSTER / "slurm" / "sweep.sbatch"
SERVE = CLUSTER / "mlflow" / "serve.sh"
COMPOSE = CLUSTER / "mlflow" / "compose.yaml"
AWS = CLUSTER / "cloud" / "aws-gpu.yaml"
RAYCLUSTER = CLUSTER / "kubernetes" / "raycluster.yaml"
RAYJOB = CLUSTER / "kubernetes" / "rayjob.yaml"
BASH = shutil.which("bash") or "/bin/bash"
SEP = "\x1f"


def load(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


# ------------------------------------------------------------------- docs/clusters.md, syntax


def test_the_cluster_page_names_only_files_that_exist() -> None:
    """docs/clusters.md, the page that describes this folder, names no file that is not there."""
    text = (REPO / "docs" / "clusters.md").read_text()
    named = set(re.findall(r"cluster/[\w./-]*\w", text))
    assert {"cluster/slurm/sweep.sbatch", "cluster/kubernetes/rayjob.yaml"} <= named
    missing = sorted(n for n in named if not (REPO / n).exists())
    assert not missing, missing



@pytest.mark.parametrize("script", [SBATCH, SERVE], ids=lambda p: p.name)
def test_shell_scripts_parse(script: Path) -> None:
    result = subprocess.run([BASH, "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------------ ray up (cloud VMs)


def test_cluster_launcher_yaml_validates_against_rays_schema() -> None:
    import jsonschema
    import ray.autoscaler

    schema_path = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
    config = load(AWS)
    jsonschema.validate(config, json.loads(schema_path.read_text()))

    # Ray's own checks beyond the schema (head type exists, min_workers fit max_workers), on the
    # config as `ray up` fills it out with the provider's defaults.
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(config))


def test_cluster_launcher_yaml_has_a_gpu_worker_type() -> None:
    config = load(AWS)
    types = config["available_node_types"]
    head = config["head_node_type"]
    gpu_types = {name: t for name, t in types.items() if name != head and t["resources"].get("GPU", 0) >= 1}
    assert gpu_types, "no worker type declares GPUs"
    for t in gpu_types.values():
        assert t.get("max_workers", 0) >= 1
        assert re.match(r"(g|p)\d", t["node_config"]["InstanceType"]), t["node_config"]["InstanceType"]
    # The custom resource the README's example asks for exists on some node type.
    assert any("large_gpu" in t["resources"] for t in types.values())


def test_cluster_launcher_yaml_installs_the_synced_checkout_and_wires_the_head() -> None:
    config = load(AWS)
    (remote,) = config["file_mounts"]
    assert config["file_mounts"][remote] == "."
    assert any(remote in cmd and "pip install" in cmd for cmd in config["setup_commands"])
    assert ".gitignore" in config["rsync_filter"]  # .venv, multirun/, mlruns.db stay home
    head_cmd = " ".join(config["head_start_ray_commands"])
    port = re.search(r"ray start --head --port=(\d+)", head_cmd).group(1)
    assert f"--address=$RAY_HEAD_IP:{port}" in " ".join(config["worker_start_ray_commands"])
    # Image and laptop must run the same Ray.
    import ray

    assert f"rayproject/ray:{ray.__version__}-py3{sys.version_info.minor}" in config["docker"]["image"]


# ---------------------------------------------------------------------------------- KubeRay


def containers(pod_template: dict) -> list[dict]:
    return pod_template["spec"]["containers"]


def test_raycluster_manifest() -> None:
    doc = load(RAYCLUSTER)
    assert doc["apiVersion"] == "ray.io/v1"
    assert doc["kind"] == "RayCluster"
    spec = doc["spec"]
    import ray

    assert spec["rayVersion"] == ray.__version__  # the Ray the sweeps are written against
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    for group in groups:
        # KubeRay's CRD types rayStartParams as map[string]string.
        assert all(isinstance(v, str) for v in group["rayStartParams"].values()), group["rayStartParams"]
    # One image on every pod: the code lies at the same path everywhere (ray.working_dir=null).
    assert len({c["image"] for g in groups for c in containers(g["template"])}) == 1
    gpu_groups = [
        g for g in spec["workerGroupSpecs"]
        if any(int(c["resources"]["limits"].get("nvidia.com/gpu", 0)) >= 1 for c in containers(g["template"]))
    ]
    assert gpu_groups, "no worker group requests nvidia.com/gpu"
    for g in gpu_groups:
        for c in containers(g["template"]):
            assert c["resources"]["requests"].get("nvidia.com/gpu") == c["resources"]["limits"]["nvidia.com/gpu"]
    # The custom resource: KubeRay pastes the value into `ray start --resources=...` unquoted.
    custom = gpu_groups[0]["rayStartParams"]["resources"]
    assert custom[0] == custom[-1] == '"'
    assert json.loads(custom[1:-1].replace('\\"', '"')) == {"large_gpu": 1}
    assert spec["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"


def test_rayjob_manifest_runs_the_sweep_on_the_raycluster() -> None:
    cluster = load(RAYCLUSTER)
    job = load(RAYJOB)
    assert job["apiVersion"] == "ray.io/v1"
    assert job["kind"] == "RayJob"
    spec = job["spec"]
    assert spec["clusterSelector"]["ray.io/cluster"] == cluster["metadata"]["name"]

    # The entrypoint is a shell command: `cd <repo in the image> && python <app> <overrides>`.
    entry = spec["entrypoint"]
    assert "\n" not in entry
    cd, _, command = entry.partition("&&")
    assert shlex.split(cd)[0] == "cd"
    argv = shlex.split(command)
    assert argv[0] == "python"
    assert (REPO / argv[1]).is_file(), argv[1]
    assert "--multirun" in argv and "hydra/sweeper=multiverse" in argv
    # The driver runs on the head pod, where Ray sets RAY_ADDRESS for a job's entrypoint.
    assert "ray.address=auto" in argv

    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    overrides = {o.key_or_group: o.value() for o in parser.parse_overrides([a for a in argv[2:] if "=" in a])}
    assert overrides["ray.working_dir"] is None  # the image has the code on every pod
    assert str(overrides["mlflow.tracking_uri"]).startswith("http")


# --------------------------------------------------------------------------- docker compose

_VAR = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def interpolate(value, env: dict[str, str]):
    """Compose's variable interpolation (``${X}``, ``${X:-default}``, ``${X:?error}``, ``$$``)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3)
        val = env.get(name)
        if op in (":-", "-"):
            return val if (val or (op == "-" and val is not None)) else arg
        if op in (":?", "?"):
            if not val:
                raise KeyError(f"{name}: {arg}")
            return val
        return val or ""

    return _VAR.sub(sub, value)


def test_compose_file_is_postgres_backed_uses_serve_sh_and_stays_on_loopback() -> None:
    raw = load(COMPOSE)
    with pytest.raises(KeyError, match="POSTGRES_PASSWORD"):
        interpolate(raw, {})  # no default database password
    doc = interpolate(raw, {"POSTGRES_PASSWORD": "pw"})
    services = doc["services"]
    assert services["postgres"]["image"].startswith("postgres:")
    mlflow = services["mlflow"]
    assert mlflow["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert any(v.split(":")[0] == "./serve.sh" for v in mlflow["volumes"])
    assert any("serve.sh" in part for part in mlflow["entrypoint"])
    assert mlflow["environment"]["MLFLOW_BACKEND_STORE_URI"].startswith("postgresql")
    assert "@postgres:5432/" in mlflow["environment"]["MLFLOW_BACKEND_STORE_URI"]
    # The image has the server's extras: PostgreSQL driver, basic auth's forms, S3 client.
    dockerfile = mlflow["build"]["dockerfile_inline"]
    for package in ("mlflow==", "psycopg", "Flask-WTF", "boto3"):
        assert package in dockerfile
    published = [(name, p) for name, s in services.items() for p in s.get("ports", [])]
    assert published
    for name, port in published:
        assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond this machine"
    assert "ports" not in services["postgres"]
    # Optional services only start on request.
    for name in ("minio", "minio-bucket"):
        assert services[name]["profiles"] == ["minio"]


def write(path: Path, text: str, mode: int = 0o755) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    path.chmod(mode)
    return path


def test_compose_environment_starts_serve_sh_as_intended(tmp_path: Path) -> None:
    """serve.sh, given the environment compose gives the mlflow service, runs the right server."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "mlflow.argv"
    write(bin_dir / "mlflow", f"""
        #!/usr/bin/env bash
        printf '%s\\n' "$@" > {shlex.quote(str(log))}
    """)
    doc = interpolate(load(COMPOSE), {"POSTGRES_PASSWORD": "pw"})
    env = {k: str(v) for k, v in doc["services"]["mlflow"]["environment"].items() if v is not None}
    env["MLFLOW_ARTIFACTS_DESTINATION"] = str(tmp_path / "artifacts")  # the container's /mlflow
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    result = subprocess.run([BASH, str(SERVE)], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    argv = log.read_text().splitlines()
    assert argv[0] == "server"
    assert "--serve-artifacts" in argv

    def opt(name: str) -> str:
        return argv[argv.index(name) + 1]

    assert opt("--backend-store-uri") == "postgresql+psycopg://mlflow:pw@postgres:5432/mlflow"
    assert opt("--host") == "0.0.0.0" and opt("--port") == "5000"  # inside the container
    assert opt("--artifacts-destination") == env["MLFLOW_ARTIFACTS_DESTINATION"]
    assert "--app-name" not in argv  # basic auth is opt-in (MLFLOW_AUTH=1)


# ----------------------------------------------------------------------------------- Slurm


@pytest.fixture
def slurm(tmp_path: Path):
    """Fake Slurm, Ray and GPU tools; returns a runner for the sbatch script."""
    fake = tmp_path / "fake"
    bin_dir = fake / "bin"
    pylib = fake / "pylib" / "ray"
    bin_dir.mkdir(parents=True)
    pylib.mkdir(parents=True)
    log = fake / "log"
    log.touch()
    logline = f"""log() {{ local IFS=$'{SEP}'; echo "$*" >> {shlex.quote(str(log))}; }}"""
    write(bin_dir / "scontrol", f"""
        #!/usr/bin/env bash
        {logline}
        log scontrol "${{FAKE_NODE:-}}" "$@"
        [[ "$1" == requeue ]] && exit 0
        [[ "$1 $2" == "show hostnames" ]] || exit 1
        printf '%s\\n' $FAKE_HOSTNAMES
    """)
    # srun: log the options, then run the command as if on the node named by --nodelist, with
    # the step environment Slurm would give there (SLURM_GPUS_ON_NODE from FAKE_GPUS_<node>).
    write(bin_dir / "srun", f"""
        #!/usr/bin/env bash
        {logline}
        node=""; opts=()
        while (($#)); do
          case "$1" in
            --nodelist=*) node=${{1#*=}}; opts+=("$1"); shift ;;
            -w|--nodelist) node=$2; opts+=("$1" "$2"); shift 2 ;;
            -*) opts+=("$1"); shift ;;
            *) break ;;
          esac
        done
        cmd=$1
        if [[ "$1 ${{2:-}}" == "bash -c" ]]; then
          if [[ "$3" == *start_ray_node* ]]; then cmd="bash:ray-start"; else cmd="bash:${{3%% *}}"; fi
        fi
        log srun "$node" "${{opts[@]}}" -- "$cmd"
        export FAKE_NODE=$node
        gpus_var="FAKE_GPUS_${{node//[^A-Za-z0-9]/_}}"
        if [[ -n "${{!gpus_var:-}}" ]]; then export SLURM_GPUS_ON_NODE=${{!gpus_var}}; fi
        exec "$@"
    """)
    write(bin_dir / "hostname", """
        #!/usr/bin/env bash
        echo "127.0.1.1 fe80::1 10.1.0.${FAKE_NODE//[^0-9]/} 172.17.0.1"
    """)
    write(bin_dir / "nvidia-smi", """
        #!/usr/bin/env bash
        for ((i = 0; i < ${FAKE_NVIDIA_GPUS:-0}; i++)); do echo "GPU $i: NVIDIA A100 (UUID: GPU-$i)"; done
    """)
    # ray start: the head joins after FAKE_HEAD_DELAY s, a worker after FAKE_JOIN_DELAY s; FAKE_NEVER_JOIN nodes
    # never do; FAKE_FAIL_NODES exit at once. --block keeps the process alive until it is stopped.
    write(bin_dir / "ray", f"""
        #!/usr/bin/env bash
        {logline}
        log ray "${{FAKE_NODE:-}}" "$@"
        log env "${{FAKE_NODE:-}}" "${{RAY_AUTH_MODE-unset}}" "${{RAY_AUTH_TOKEN-unset}}"
        joined={shlex.quote(str(fake / "joined"))}
        if [[ "$1" == get-auth-token ]]; then printf '%s' "${{RAY_AUTH_TOKEN:-file-token}}"; exit 0; fi
        if [[ "$1" == start ]]; then
          echo $$ >> {shlex.quote(str(fake / "pids"))}
          [[ " ${{FAKE_FAIL_NODES:-}} " == *" $FAKE_NODE "* ]] && exit 1
          [[ " ${{FAKE_NEVER_JOIN:-}} " == *" $FAKE_NODE "* ]] && exec sleep 60
          if [[ " $* " == *" --head "* ]]; then sleep "${{FAKE_HEAD_DELAY:-0}}"
          else sleep "${{FAKE_JOIN_DELAY:-0}}"; fi
          echo "$FAKE_NODE" >> "$joined"
          log joined "$FAKE_NODE"
          [[ " $* " == *" --block "* ]] && exec sleep 60
        fi
        exit 0
    """)
    # The Python side of the node count: `import ray; ray.init(address); ray.nodes()`.
    (pylib / "__init__.py").write_text(textwrap.dedent(f"""
        import os
        _LOG = {str(log)!r}
        _JOINED = {str(fake / "joined")!r}

        def init(address=None, **kwargs):
            with open(_LOG, "a") as f:
                f.write({SEP!r}.join(["ray.init", "", str(address)]) + "\\n")

        def nodes():
            names = open(_JOINED).read().split() if os.path.exists(_JOINED) else []
            return [{{"Alive": True, "NodeManagerHostname": n}} for n in names]
    """))
    # The sweep: logs its argv; FAKE_SWEEP_SLEEP keeps it running (SIGTERM ends it with 75, preempted, logged).
    sweep = write(bin_dir / "fake-sweep", f"""
        #!/usr/bin/env bash
        {logline}
        log sweep "" "$@"
        log env sweep "${{RAY_AUTH_MODE-unset}}" "${{RAY_AUTH_TOKEN-unset}}"
        trap 'kill $nap 2>/dev/null; log term ""; exit 75' TERM
        if [[ -n "${{FAKE_SWEEP_SLEEP:-}}" ]]; then sleep "$FAKE_SWEEP_SLEEP" & nap=$!; wait $nap; fi
        exit "${{FAKE_SWEEP_RC:-0}}"
    """)
    write(bin_dir / "sweeper", f"""
        #!/usr/bin/env bash
        {logline}
        log sweeper "" "$@"
    """)

    base_env = {
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(pylib.parent),
        "SLURM_JOB_NODELIST": "n[1-3]",
        "SLURM_JOB_ID": "4242",
        "SLURMD_NODENAME": "n1",  # the node running the batch script
        "SLURM_CPUS_PER_TASK": "4",
        "FAKE_HOSTNAMES": "n1 n2 n3",
        "RAY_POLL_INTERVAL": "0.1",
        "RAY_NODES_TIMEOUT": "20",
        "RAY_STOP_GRACE": "10",
    }

    class Run:
        sweep_cmd = [str(sweep), "--multirun", "hydra/sweeper=multiverse"]

        def env(self, **extra: str) -> dict[str, str]:
            return {**base_env, **extra}

        def popen(self, args: list[str], **extra: str) -> subprocess.Popen:
            return subprocess.Popen([BASH, str(SBATCH), *args], env=self.env(**extra), cwd=tmp_path,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def __call__(self, args: list[str] | None = None, **extra: str) -> subprocess.CompletedProcess:
            args = self.sweep_cmd if args is None else args
            proc = self.popen(args, **extra)
            out, err = proc.communicate(timeout=60)
            return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

        @staticmethod
        def log() -> list[tuple[str, str, list[str]]]:
            entries = []
            for line in log.read_text().splitlines():
                prog, node, *args = line.split(SEP)
                entries.append((prog, node, args))
            return entries

        @staticmethod
        def assert_no_ray_left() -> None:
            pids = [int(p) for p in (fake / "pids").read_text().split()] if (fake / "pids").exists() else []
            assert pids
            deadline = time.monotonic() + 5
            alive = pids
            while alive and time.monotonic() < deadline:
                alive = [p for p in pids if _alive(p)]
                time.sleep(0.05)
            assert not alive, f"fake `ray start` processes still running: {alive}"

    yield Run()
    # Whatever a failing test left behind.
    if (fake / "pids").exists():
        for p in (fake / "pids").read_text().split():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(p), signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def starts(entries):
    return {node: args for prog, node, args in entries if prog == "ray" and args[:1] == ["start"]}


def test_sbatch_starts_head_then_workers_then_runs_the_sweep(slurm) -> None:
    result = slurm(FAKE_HEAD_DELAY="0.3", FAKE_JOIN_DELAY="0.5", FAKE_GPUS_n2="2", FAKE_GPUS_n3="4",
                   MLFLOW_TRACKING_URI="http://mlflow.lab.example:5000")
    assert result.returncode == 0, result.stderr
    entries = slurm.log()
    progs = [e[0] for e in entries]

    assert ("scontrol", "", ["show", "hostnames", "n[1-3]"]) in entries
    started = starts(entries)
    assert set(started) == {"n1", "n2", "n3"}
    head = started["n1"]
    assert "--head" in head and "--port=6379" in head and "--block" in head
    assert "--node-ip-address=10.1.0.1" in head  # the IPv4 address of the head node
    assert "--num-cpus=4" in head and "--num-gpus=0" in head
    for node, gpus in (("n2", 2), ("n3", 4)):
        args = started[node]
        assert "--address=10.1.0.1:6379" in args and "--head" not in args
        assert f"--num-gpus={gpus}" in args  # counted on that node, inside its step
        assert "--num-cpus=4" in args and "--block" in args
    # Each `ray start` ran in an srun step on its node, with the job's CPUs per task.
    steps = [(node, args) for prog, node, args in entries if prog == "srun" and args[-1] == "bash:ray-start"]
    assert sorted(node for node, _ in steps) == ["n1", "n2", "n3"]
    assert all("--cpus-per-task=4" in args and "--ntasks=1" in args for _, args in steps)
    # Workers were launched only once the head was up.
    worker_starts = [i for i, (prog, node, args) in enumerate(entries)
                     if prog == "ray" and args[:1] == ["start"] and node != "n1"]
    assert progs.index("joined") < min(worker_starts)

    (sweep,) = [args for prog, _, args in entries if prog == "sweep"]
    assert sweep == [*slurm.sweep_cmd[1:], "hydra.sweep.dir=multirun/slurm-4242", "ray.address=10.1.0.1:6379",
                     "mlflow.tracking_uri='http://mlflow.lab.example:5000'"]
    i_sweep = progs.index("sweep")
    assert max(i for i, p in enumerate(progs) if p == "joined") < i_sweep, "the sweep started before all nodes joined"
    assert all(args[-1] == "10.1.0.1:6379" for prog, _, args in entries if prog == "ray.init")
    stops = [i for i, e in enumerate(entries) if e[0] == "ray" and e[2][:1] == ["stop"]]
    assert stops and stops[0] > i_sweep
    slurm.assert_no_ray_left()


def env_seen(entries) -> dict[str, tuple[str, ...]]:
    """What RAY_AUTH_MODE and RAY_AUTH_TOKEN were in each `ray start` and in the sweep.

    Each `env` line follows its own node's `ray` line; the nodes start side by side, so their lines
    interleave, and each is paired by its node, not by the line before it.
    """
    seen: dict[str, tuple[str, ...]] = {}
    last: dict[str, list[str]] = {}
    for prog, node, args in entries:
        if prog == "ray":
            last[node] = args
        elif prog == "env" and (node == "sweep" or last.pop(node, [])[:1] == ["start"]):
            seen[node] = tuple(args)
    return seen


def test_sbatch_turns_token_auth_on_everywhere(slurm) -> None:
    result = slurm()
    assert result.returncode == 0, result.stderr
    entries = slurm.log()
    assert any(e[0] == "ray" and e[2][:2] == ["get-auth-token", "--generate"] for e in entries)
    seen = env_seen(entries)
    assert set(seen) == {"n1", "n2", "n3", "sweep"}
    assert set(seen.values()) == {("token", "file-token")}  # head, workers and driver alike

    result = slurm(RAY_AUTH_TOKEN="from-env")
    assert set(env_seen(slurm.log()[len(entries):]).values()) == {("token", "from-env")}


def test_sbatch_leaves_token_auth_off_on_request(slurm) -> None:
    result = slurm(RAY_AUTH_MODE="disabled")
    assert result.returncode == 0, result.stderr
    entries = slurm.log()
    assert not any(e[0] == "ray" and e[2][:1] == ["get-auth-token"] for e in entries)
    assert set(env_seen(entries).values()) == {("disabled", "unset")}


def test_sbatch_passes_the_sweeps_exit_status_and_keeps_given_overrides(slurm) -> None:
    cmd = [*slurm.sweep_cmd, "ray.address=10.9.9.9:7000", "mlflow.tracking_uri=http://x:5000", "hydra.sweep.dir=/s"]
    result = slurm(cmd, FAKE_SWEEP_RC="3", MLFLOW_TRACKING_URI="http://other:5000")
    assert result.returncode == 3
    entries = slurm.log()
    (sweep,) = [args for prog, _, args in entries if prog == "sweep"]
    assert sweep == cmd[1:]  # nothing appended over the user's own settings
    assert any(e[0] == "ray" and e[2][:1] == ["stop"] for e in entries)
    slurm.assert_no_ray_left()


def test_sbatch_appends_no_tracking_uri_without_the_variable(slurm) -> None:
    result = slurm(RAY_PORT="6380", FAKE_HOSTNAMES="n1", RAY_START_ARGS='--resources={"large_gpu":1} --temp-dir=/x')
    assert result.returncode == 0, result.stderr
    entries = slurm.log()
    (sweep,) = [args for prog, _, args in entries if prog == "sweep"]
    assert sweep == [*slurm.sweep_cmd[1:], "hydra.sweep.dir=multirun/slurm-4242", "ray.address=10.1.0.1:6380"]
    head = starts(entries)["n1"]  # a one-node allocation: the head alone
    assert "--port=6380" in head and '--resources={"large_gpu":1}' in head and "--temp-dir=/x" in head


def test_sbatch_puts_the_head_where_the_batch_script_runs(slurm) -> None:
    result = slurm(SLURMD_NODENAME="n2")
    assert result.returncode == 0, result.stderr
    started = starts(slurm.log())
    assert "--head" in started["n2"] and "--node-ip-address=10.1.0.2" in started["n2"]
    for node in ("n1", "n3"):
        assert "--address=10.1.0.2:6379" in started[node]
    result = slurm(SLURMD_NODENAME="login1")
    assert result.returncode == 1 and "not in the allocation" in result.stderr


def test_sbatch_gives_up_when_a_node_never_joins(slurm) -> None:
    t0 = time.monotonic()
    result = slurm(FAKE_NEVER_JOIN="n3", RAY_NODES_TIMEOUT="2")
    assert result.returncode != 0
    assert time.monotonic() - t0 < 15
    assert "2 of 3 Ray nodes joined 10.1.0.1:6379" in result.stderr
    entries = slurm.log()
    assert not any(e[0] == "sweep" for e in entries)
    assert any(e[0] == "ray" and e[2][:1] == ["stop"] for e in entries)
    slurm.assert_no_ray_left()


def test_sbatch_fails_fast_when_a_ray_start_step_ends(slurm) -> None:
    t0 = time.monotonic()
    result = slurm(FAKE_FAIL_NODES="n2", FAKE_JOIN_DELAY="0.2")
    assert result.returncode != 0
    assert time.monotonic() - t0 < 10  # well before RAY_NODES_TIMEOUT=20
    assert "step ended before the cluster was complete" in result.stderr
    assert not any(e[0] == "sweep" for e in slurm.log())
    slurm.assert_no_ray_left()


def test_sbatch_stops_the_sweep_at_its_checkpoints_on_sigterm_and_requeues_the_job(slurm) -> None:
    proc = slurm.popen(slurm.sweep_cmd, FAKE_SWEEP_SLEEP="30")
    try:
        deadline = time.monotonic() + 20
        while not any(e[0] == "sweep" for e in slurm.log()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 75, err  # the sweep's: preempted at its checkpoints
    entries = slurm.log()
    progs = [e[0] for e in entries]
    assert "term" in progs, "the sweep was not asked to stop (SIGTERM: it waits for its trials' checkpoints)"
    requeue = entries.index(("scontrol", "", ["requeue", "4242"]))
    stops = [i for i, e in enumerate(entries) if e[0] == "ray" and e[2][:1] == ["stop"]]
    assert stops and stops[0] > requeue > progs.index("term")
    assert "requeueing job 4242" in err
    slurm.assert_no_ray_left()


def test_sbatch_requeues_a_sweep_that_exits_preempted_and_resumes_it_when_the_job_runs_again(
        slurm, tmp_path: Path) -> None:
    result = slurm(FAKE_SWEEP_RC="75")  # e.g. SIGTERM reached the driver from elsewhere
    assert result.returncode == 75
    assert ("scontrol", "", ["requeue", "4242"]) in slurm.log()

    (tmp_path / "multirun" / "slurm-4242").mkdir(parents=True)
    (tmp_path / "multirun" / "slurm-4242" / "sweep.json").write_text("{}")  # what the first run left
    before = len(slurm.log())
    result = slurm(FAKE_HOSTNAMES="n1", SLURM_RESTART_COUNT="1")
    assert result.returncode == 0, result.stderr
    entries = slurm.log()[before:]
    resumed = [args for prog, _, args in entries if prog == "sweeper"]
    assert resumed == [["resume", "multirun/slurm-4242", "ray.address=10.1.0.1:6379"]]  # the new head
    assert not [e for e in entries if e[0] == "sweep"]


def test_sbatch_needs_a_command_and_an_allocation(slurm) -> None:
    result = slurm([])
    assert result.returncode == 2 and "usage:" in result.stderr
    env = slurm.env()
    del env["SLURM_JOB_NODELIST"]
    result = subprocess.run([BASH, str(SBATCH), *slurm.sweep_cmd], env=env, capture_output=True, text=True)
    assert result.returncode == 2 and "sbatch" in result.stderr
    result = slurm(RAY_NODES_TIMEOUT="1.5")
    assert result.returncode == 2 and "RAY_NODES_TIMEOUT=1.5 is not a whole number" in result.stderr
    assert not slurm.log()


@pytest.mark.parametrize(
    ("env", "nvidia_gpus", "expected"),
    [
        ({"SLURM_GPUS_ON_NODE": "3", "CUDA_VISIBLE_DEVICES": "0"}, 8, "3"),
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, 8, "2"),
        ({"CUDA_VISIBLE_DEVICES": ""}, 8, "0"),
        ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, 8, "0"),
        ({}, 2, "2"),
        ({}, 0, "0"),
        ({}, None, "0"),  # no nvidia-smi at all
    ],
)
def test_detect_gpus(tmp_path: Path, env: dict, nvidia_gpus: int | None, expected: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("tr", "grep"):  # and nothing else: no nvidia-smi of this machine
        (bin_dir / tool).symlink_to(shutil.which(tool))
    if nvidia_gpus is not None:
        write(bin_dir / "nvidia-smi", f"""
            #!{BASH}
            for ((i = 0; i < {nvidia_gpus}; i++)); do echo "GPU $i: NVIDIA H100 (UUID: GPU-$i)"; done
        """)
    result = subprocess.run([BASH, "-c", f"source {shlex.quote(str(SBATCH))}; detect_gpus"],
                            env={"PATH": str(bin_dir), **env}, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected
