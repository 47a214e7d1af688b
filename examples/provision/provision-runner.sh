#!/usr/bin/env bash
# Turn a freshly flashed Jetson into a registered self-hosted runner for OBLITERATUS'
# jetson-runtime gate, unattended. Re-running it changes nothing except renewing the
# evidence (that is its point: evidence goes stale after 30 days).
#
#   1. install jetson-install with pipx, from a wheel file or URL (until the name is published)
#   2. jetson-install obliteratus --yes --json      (unchanged when the environment is current)
#   3. jetson-install doctor --strict               (the gate; evidence and gate record kept)
#   4. jetson-install labels                         (cuda only with that fresh passing evidence)
#   5. register the runner with those labels, once   (skipped when RUNNER_DIR is not given)
#
# Inputs (environment variables):
#   JETSON_INSTALL_SPEC     required: what pipx installs, e.g. ./jetson_install-0.1.0-py3-none-any.whl
#   JETSON_INSTALL_OPTIONS  more options for `jetson-install obliteratus`, e.g. mirrors:
#                           "--vendor-index https://mirror/jp6/cu126 --default-index https://mirror/simple"
#                           (jetson-install's own variables work too: JETSON_INSTALL_ROOT, JETSON_L4T_VERSION,
#                           JETSON_INSTALL_VENDOR_INDEX, JETSON_INSTALL_DEFAULT_INDEX)
#   JETSON_INSTALL_VENV     the environment (default: jetson-install's per-user default)
#   EVIDENCE_DIR            where evidence, the gate record and labels go
#                           (default: ${XDG_STATE_HOME:-$HOME/.local/state}/jetson-install)
#   RUNNER_DIR              an unpacked GitHub Actions runner (the operator brings it)
#   RUNNER_URL              the repository or organisation URL to register with
#   RUNNER_TOKEN_FILE       a file holding the registration token; it is never printed and never
#                           put on a command line (config.sh reads ACTIONS_RUNNER_INPUT_TOKEN,
#                           https://github.com/actions/runner, src/Runner.Listener/CommandSettings.cs)
#   RUNNER_NAME             default: the host name
#   PIPX                    default: pipx
#
# Exit status: 0 when the runner is provisioned (or already was), else the failing
# command's status, after one line saying which step failed.
set -euo pipefail

: "${JETSON_INSTALL_SPEC:?set JETSON_INSTALL_SPEC to a jetson-install wheel file or URL}"
PIPX=${PIPX:-pipx}
EVIDENCE_DIR=${EVIDENCE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/jetson-install}
read -r -a install_options <<<"${JETSON_INSTALL_OPTIONS:-}"
venv_option=()
[ -n "${JETSON_INSTALL_VENV:-}" ] && venv_option=(--venv "$JETSON_INSTALL_VENV")

say() { echo "provision: $*" >&2; }
fail() { say "FAILED at $1 (exit $2)"; exit "$2"; }

# 1. The tool. A wheel's file name carries its version: reinstall only when it differs.
wanted=$(basename "$JETSON_INSTALL_SPEC" | sed -n 's/^jetson_install-\([^-]*\)-.*\.whl$/\1/p')
installed=$("$PIPX" list --short 2>/dev/null | awk '$1 == "jetson-install" {print $2}')
if [ -n "$installed" ] && { [ -z "$wanted" ] || [ "$installed" = "$wanted" ]; }; then
    say "jetson-install $installed already installed"
else
    force=()
    [ -n "$installed" ] && force=(--force)
    "$PIPX" install "${force[@]}" "$JETSON_INSTALL_SPEC" >&2 || fail "pipx install" $?
    say "installed jetson-install from $JETSON_INSTALL_SPEC"
fi
bin_dir=$("$PIPX" environment --value PIPX_BIN_DIR)
tool="$bin_dir/jetson-install"

mkdir -p "$EVIDENCE_DIR"

# 2. The environment. stdout is one JSON object; the tool's error and fix lines go to stderr.
status=0
"$tool" obliteratus "${venv_option[@]}" "${install_options[@]}" --yes --json >"$EVIDENCE_DIR/install.json" || status=$?
[ "$status" -eq 0 ] || fail "jetson-install obliteratus (see $EVIDENCE_DIR/install.json)" "$status"
say "environment: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$EVIDENCE_DIR/install.json")"

# 3. The gate: every check that applies must run and pass; the evidence and upstream's gate
#    record land in a fixed place, where `jetson-install labels` and the workflow find them.
status=0
"$tool" doctor --strict "${venv_option[@]}" --evidence "$EVIDENCE_DIR/evidence.json" \
    --gate-evidence "$EVIDENCE_DIR/jetson-runtime.json" >&2 || status=$?
[ "$status" -eq 0 ] || fail "jetson-install doctor --strict (evidence: $EVIDENCE_DIR/evidence.json)" "$status"

# 4. The labels, from this Jetson and that evidence. Rewritten only when they change.
labels=$("$tool" labels --evidence "$EVIDENCE_DIR/evidence.json" 2>/dev/null) || fail "jetson-install labels" $?
if [ "$(cat "$EVIDENCE_DIR/labels.txt" 2>/dev/null)" != "$labels" ]; then
    echo "$labels" >"$EVIDENCE_DIR/labels.txt"
fi
say "labels: $labels"

# 5. The runner, registered once. The token goes to config.sh through its environment only.
if [ -z "${RUNNER_DIR:-}" ]; then
    say "RUNNER_DIR not given: not registering a runner"
    exit 0
fi
if [ -f "$RUNNER_DIR/.runner" ]; then
    say "runner already registered in $RUNNER_DIR"
    exit 0
fi
: "${RUNNER_URL:?set RUNNER_URL to the repository or organisation URL}"
: "${RUNNER_TOKEN_FILE:?set RUNNER_TOKEN_FILE to a file holding the registration token}"
[ -r "$RUNNER_TOKEN_FILE" ] || { say "cannot read RUNNER_TOKEN_FILE ($RUNNER_TOKEN_FILE)"; exit 2; }
status=0
(
    cd "$RUNNER_DIR"
    ACTIONS_RUNNER_INPUT_TOKEN=$(tr -d '[:space:]' <"$RUNNER_TOKEN_FILE")
    export ACTIONS_RUNNER_INPUT_TOKEN
    ./config.sh --unattended --url "$RUNNER_URL" --name "${RUNNER_NAME:-$(hostname)}" --labels "$labels" --replace
) >&2 || status=$?
[ "$status" -eq 0 ] || fail "the runner's config.sh" "$status"
if [ -x "$RUNNER_DIR/svc.sh" ] && [ "$(id -u)" -eq 0 ]; then
    (cd "$RUNNER_DIR" && ./svc.sh install && ./svc.sh start) >&2 || fail "the runner's svc.sh" $?
fi
say "runner registered in $RUNNER_DIR"
