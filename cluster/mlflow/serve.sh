#!/usr/bin/env bash
# Run an MLflow tracking server for sweeps: PostgreSQL backend store, proxied artifacts,
# bound to 127.0.0.1 unless told otherwise, MLflow's basic-auth app on request.
#
#   MLFLOW_BACKEND_STORE_URI=postgresql://mlflow:PASS@127.0.0.1:5432/mlflow cluster/mlflow/serve.sh
#
# Settings (environment variables; mlflow's own names where it has one):
#   MLFLOW_BACKEND_STORE_URI      required: postgresql://user:password@host:port/database
#   MLFLOW_ARTIFACTS_DESTINATION  where the server stores artifacts it proxies: a directory
#                                 (default ./mlartifacts) or s3://bucket/prefix (set
#                                 MLFLOW_S3_ENDPOINT_URL for MinIO, AWS_* for credentials)
#   MLFLOW_HOST                   interface to bind (default 127.0.0.1: this machine only;
#                                 0.0.0.0 to serve a cluster, behind auth or a firewall)
#   MLFLOW_PORT                   default 5000
#   MLFLOW_WORKERS                server worker processes (default 2)
#   MLFLOW_AUTH                   1: MLflow's basic-auth app. Needs MLFLOW_AUTH_ADMIN_PASSWORD
#                                 the first time (the admin user is created with it).
#   MLFLOW_AUTH_DATABASE_URI      users and permissions (default sqlite:///./basic_auth.db)
#   MLFLOW_AUTH_DEFAULT_PERMISSION  what a signed-in user may do to others' experiments (READ)
#   MLFLOW_FLASK_SERVER_SECRET_KEY  the auth app's CSRF key; default: made once, kept in
#                                 ./.mlflow_flask_secret_key (mode 600), the same after restarts
#   MLFLOW_SERVER_ENABLE_JOB_EXECUTION  MLflow's job runner for GenAI evaluation; off here (false)
#                                 since sweeps don't use it and it starts ~8 extra processes
# Any argument is passed on to `mlflow server` (e.g. --allowed-hosts "mlflow.lab.example:*": Host headers carry the port).
# The process execs into `mlflow server`: stopping it (Ctrl-C, SIGTERM) stops the server.
set -euo pipefail

: "${MLFLOW_BACKEND_STORE_URI:?set MLFLOW_BACKEND_STORE_URI, e.g. postgresql://mlflow:PASS@127.0.0.1:5432/mlflow}"
case "$MLFLOW_BACKEND_STORE_URI" in
  postgresql://*|postgresql+*://*) ;;
  *) echo "serve.sh: MLFLOW_BACKEND_STORE_URI=${MLFLOW_BACKEND_STORE_URI%%://*}://... is not PostgreSQL;" \
          "this script is for postgresql://user:password@host:port/database" >&2; exit 2 ;;
esac
artifacts="${MLFLOW_ARTIFACTS_DESTINATION:-./mlartifacts}"
args=(
  --backend-store-uri "$MLFLOW_BACKEND_STORE_URI"
  --serve-artifacts --artifacts-destination "$artifacts"
  --host "${MLFLOW_HOST:-127.0.0.1}" --port "${MLFLOW_PORT:-5000}"
  --workers "${MLFLOW_WORKERS:-2}"
)

if [[ "${MLFLOW_AUTH:-0}" == 1 ]]; then
  auth_db="${MLFLOW_AUTH_DATABASE_URI:-sqlite:///$(pwd)/basic_auth.db}"
  if [[ -z "${MLFLOW_AUTH_ADMIN_PASSWORD:-}" && "$auth_db" == sqlite:///* && ! -s "${auth_db#sqlite:///}" ]]; then
    echo "serve.sh: MLFLOW_AUTH=1 needs MLFLOW_AUTH_ADMIN_PASSWORD to create the admin user" >&2; exit 2
  fi
  MLFLOW_AUTH_CONFIG_PATH="${MLFLOW_AUTH_CONFIG_PATH:-$(mktemp -t mlflow-basic-auth.XXXXXX.ini)}"
  cat > "$MLFLOW_AUTH_CONFIG_PATH" <<INI
[mlflow]
default_permission = ${MLFLOW_AUTH_DEFAULT_PERMISSION:-READ}
database_uri = $auth_db
admin_username = ${MLFLOW_AUTH_ADMIN_USERNAME:-admin}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
INI
  export MLFLOW_AUTH_CONFIG_PATH
  if [[ -z "${MLFLOW_FLASK_SERVER_SECRET_KEY:-}" ]]; then
    key_file="$(pwd)/.mlflow_flask_secret_key"
    [[ -s "$key_file" ]] || (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$key_file")
    MLFLOW_FLASK_SERVER_SECRET_KEY="$(cat "$key_file")"
    export MLFLOW_FLASK_SERVER_SECRET_KEY
  fi
  args+=(--app-name basic-auth)
fi

export MLFLOW_SERVER_ENABLE_JOB_EXECUTION="${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false}"
[[ "$artifacts" == *://* ]] || mkdir -p "$artifacts"
exec mlflow server "${args[@]}" "$@"
