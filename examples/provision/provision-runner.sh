#!/usr/bin/env bash
# Turn a freshly flashed Jetson into a registered self-hosted runner for OBLITERATUS'
# jetson-runtime gate, unattended. Re-running it changes nothing except renewing the
# evidence and, when they changed, the runner's labels (evidence goes stale after 30 days:
# run it again from a timer).
#
#   1. install jetson-install: with pipx (1.0.0, Ubuntu 22.04's, or newer), else, with no pipx
#      on the board, into a venv of its own (python3 -m venv); again when JETSON_INSTALL_SPEC changes
#   2. jetson-install obliteratus --yes --json      (unchanged when the environment is current)
#   3. jetson-install doctor --strict               (the gate; evidence and gate record kept)
#   4. jetson-install labels                         (cuda only with that fresh passing evidence)
#   5. register the runner with those labels, as an unprivileged user, with a service that
#      starts at boot; re-register it whenever the labels change (skipped without RUNNER_DIR)
#
# When steps 2 or 3 fail, steps 4 and 5 still run, so a runner whose gate fails or whose
# evidence went stale loses `cuda`; the script then exits with the failed step's status.
#
# Run as root, the script makes or takes RUNNER_USER, runs steps 1-4 as that user (the tool
# and the environment are theirs), registers the runner as them (the runner's config.sh refuses
# root) and installs the service (svc.sh, as root). Run as the runner's user, it installs the
# service with sudo when sudo needs no password, else says the command to run.
#
# Inputs (environment variables):
#   JETSON_INSTALL_SPEC     required: what is installed, e.g. ./jetson_install-0.1.0-py3-none-any.whl
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
#   RUNNER_USER             run as root: the runner's user, made when missing (default: runner)
#   PIPX                    default: pipx; when it is not found, the tool gets a venv of its own in
#                           ${XDG_DATA_HOME:-$HOME/.local/share}/jetson-install-tool
#
# Either way the tool is reachable as ${PIPX_BIN_DIR:-$HOME/.local/bin}/jetson-install.
# Exit status: 0 when the runner is provisioned (or already was); 2 for a missing or bad
# input; else the failing command's status. Every failure prints one line naming the step.
set -Eeuo pipefail

say() { echo "provision: $*" >&2; }
fail() { say "FAILED at $1 (exit $2)${3:+: $3}"; exit "$2"; }
step="the script's start"
# Whatever fails under `set -e` still names its step, once (not again from a subshell).
trap 'code=$?; [ "$BASH_SUBSHELL" -gt 0 ] || fail "$step" "$code"' ERR
need() { [ -n "${!1:-}" ] || { say "FAILED: $1 is not set: $2"; exit 2; }; }

need JETSON_INSTALL_SPEC "set it to a jetson-install wheel file or URL, e.g. JETSON_INSTALL_SPEC=./jetson_install-0.1.0-py3-none-any.whl"
# A wheel file by its full path, so that pipx, a re-run from elsewhere and the runner's user find it.
[ ! -e "$JETSON_INSTALL_SPEC" ] || JETSON_INSTALL_SPEC=$(realpath "$JETSON_INSTALL_SPEC")
PIPX=${PIPX:-pipx}
if [ -n "${RUNNER_DIR:-}" ]; then
    need RUNNER_URL "set it to the repository or organisation URL the runner registers with"
    need RUNNER_TOKEN_FILE "set it to a file holding the registration token"
    [ -r "$RUNNER_TOKEN_FILE" ] || { say "FAILED: cannot read RUNNER_TOKEN_FILE ($RUNNER_TOKEN_FILE)"; exit 2; }
    [ -x "$RUNNER_DIR/config.sh" ] || { say "FAILED: $RUNNER_DIR/config.sh is missing: unpack the actions/runner release there"; exit 2; }
fi

# ---------------------------------------------------------------------------- as root
if [ "$(id -u)" -eq 0 ] && [ -n "${RUNNER_DIR:-}" ]; then
    RUNNER_USER=${RUNNER_USER:-runner}
    [ "$RUNNER_USER" != root ] || { say "FAILED: RUNNER_USER=root: the runner refuses root; name an unprivileged user"; exit 2; }
    if ! id -u "$RUNNER_USER" >/dev/null 2>&1; then
        step="useradd $RUNNER_USER"
        useradd --create-home --shell /bin/bash "$RUNNER_USER"
        say "made the runner's user $RUNNER_USER"
    fi
    home=$(getent passwd "$RUNNER_USER" | cut -d: -f6)
    EVIDENCE_DIR=${EVIDENCE_DIR:-$home/.local/state/jetson-install}
    step="chown $RUNNER_DIR to $RUNNER_USER"
    chown -R "$RUNNER_USER:" "$RUNNER_DIR"
    # Steps 1-4 as the runner's user, in their home (runuser sets HOME), with this script's
    # inputs and the index, proxy and locale settings, never root's other variables (its XDG
    # folders, RUNNER_TOKEN_FILE); nothing goes on an argv. That run prints the labels.
    provisioned=0
    evidence_dir=$EVIDENCE_DIR runner_user=$RUNNER_USER
    # A copy the runner's user can read, wherever root keeps this script.
    script=$(mktemp /tmp/provision-runner.XXXXXX)
    trap 'rm -f "$script"' EXIT
    cp "$0" "$script" && chmod 0644 "$script"
    labels=$(
        while read -r name; do
            case $name in
                JETSON_*|PIP_*|UV_*|PIPX|PATH|LANG|LC_*|TZ|*_proxy|*_PROXY|SSL_CERT_*|REQUESTS_CA_BUNDLE) ;;
                *) unset "$name" 2>/dev/null || true ;;
            esac
        done < <(compgen -e)
        export EVIDENCE_DIR="$evidence_dir" PROVISION_FOR_RUNNER=1
        exec runuser -u "$runner_user" -- bash "$script" </dev/null
    ) || provisioned=$?
    # Its own failure line is said; without labels there is nothing to register.
    [ -n "$labels" ] || exit "$provisioned"
    as_user=(runuser -u "$RUNNER_USER" --)
    as_root=()
else
    provisioned=""
    EVIDENCE_DIR=${EVIDENCE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/jetson-install}
    RUNNER_USER=$(id -un)
    as_user=()
    as_root=()
    [ "$(id -u)" -eq 0 ] || as_root=(sudo -n)
fi

# ---------------------------------------------------------------------------- steps 1-4
if [ -z "$provisioned" ]; then
    bin_dir=${PIPX_BIN_DIR:-$HOME/.local/bin}
    tool="$bin_dir/jetson-install"
    mkdir -p "$EVIDENCE_DIR" "$bin_dir"
    spec_file="$EVIDENCE_DIR/tool-spec"

    # 1. The tool, installed again whenever the spec differs from the one it was installed from.
    step="finding jetson-install"
    if command -v "$PIPX" >/dev/null 2>&1; then
        # `pipx list --json` is in pipx 1.0.0; `pipx environment` and `list --short` came in 1.1.0.
        installed=$("$PIPX" list --json | python3 -c '
import json, sys
venv = json.load(sys.stdin).get("venvs", {}).get("jetson-install")
print(venv["metadata"]["main_package"]["package_version"] if venv else "")')
        how="pipx"
    else
        # Each install in a venv of its own, switched to by one rename (a venv cannot be moved).
        tool_home="${XDG_DATA_HOME:-$HOME/.local/share}/jetson-install-tool"
        installed=$("$tool_home/current/bin/python" -c 'import importlib.metadata as m; print(m.version("jetson-install"))' \
                    2>/dev/null || true)
        how="its own venv ($PIPX not found)"
    fi
    if [ -n "$installed" ] && [ "$(cat "$spec_file" 2>/dev/null)" = "$JETSON_INSTALL_SPEC" ]; then
        say "jetson-install $installed already installed"
    else
        step="installing jetson-install with $how"
        if [ "$how" = pipx ]; then
            force=()
            [ -n "$installed" ] && force=(--force)
            "$PIPX" install "${force[@]}" "$JETSON_INSTALL_SPEC" >&2
            app=$("$PIPX" list --json | python3 -c '
import json, sys
paths = json.load(sys.stdin)["venvs"]["jetson-install"]["metadata"]["main_package"]["app_paths"]
print(next(p["__Path__"] for p in paths if p["__Path__"].endswith("/jetson-install")))')
        else
            new="$tool_home/venv-$(date +%s)-$$"
            mkdir -p "$tool_home"
            python3 -m venv "$new" >&2 || { rm -rf "$new"; fail "$step" 1 "python3 -m venv failed: sudo apt-get install python3-venv (or install pipx)"; }
            "$new/bin/python" -m pip install -q "$JETSON_INSTALL_SPEC" >&2 || { code=$?; rm -rf "$new"; fail "$step" "$code"; }
            ln -sfn "$(basename "$new")" "$tool_home/current.new" && mv -T "$tool_home/current.new" "$tool_home/current"
            for old in "$tool_home"/venv-*; do [ "$old" = "$new" ] || rm -rf "$old"; done
            app="$tool_home/current/bin/jetson-install"
        fi
        # pipx 1.0.0 links into its own PIPX_BIN_DIR; one known place either way.
        [ "$app" = "$tool" ] || ln -sfn "$app" "$tool"
        printf '%s\n' "$JETSON_INSTALL_SPEC" >"$spec_file"
        say "installed jetson-install from $JETSON_INSTALL_SPEC with $how"
    fi

    read -r -a install_options <<<"${JETSON_INSTALL_OPTIONS:-}"
    venv_option=()
    [ -n "${JETSON_INSTALL_VENV:-}" ] && venv_option=(--venv "$JETSON_INSTALL_VENV")
    failed=""
    failed_status=0

    # 2. The environment. stdout is one JSON object; the tool's error and fix lines go to stderr.
    step="jetson-install obliteratus"
    status=0
    "$tool" obliteratus "${venv_option[@]}" "${install_options[@]}" --yes --json >"$EVIDENCE_DIR/install.json" || status=$?
    if [ "$status" -eq 0 ]; then
        say "environment: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$EVIDENCE_DIR/install.json")"
        # 3. The gate: every check that applies must run and pass; the evidence and upstream's
        #    gate record land in a fixed place, where `jetson-install labels` and the workflow find them.
        step="jetson-install doctor --strict"
        "$tool" doctor --strict "${venv_option[@]}" --evidence "$EVIDENCE_DIR/evidence.json" \
            --gate-evidence "$EVIDENCE_DIR/jetson-runtime.json" >&2 || status=$?
        [ "$status" -eq 0 ] || { failed="jetson-install doctor --strict (evidence: $EVIDENCE_DIR/evidence.json)"; failed_status=$status; }
    else
        failed="jetson-install obliteratus (see $EVIDENCE_DIR/install.json)"
        failed_status=$status
    fi

    # 4. The labels, from this Jetson and that evidence (cuda only while it is fresh and passed).
    step="jetson-install labels"
    evidence=()
    [ -f "$EVIDENCE_DIR/evidence.json" ] && evidence=(--evidence "$EVIDENCE_DIR/evidence.json")
    labels=$("$tool" labels "${evidence[@]}" 2>/dev/null)
    [ "$(cat "$EVIDENCE_DIR/labels.txt" 2>/dev/null)" = "$labels" ] || echo "$labels" >"$EVIDENCE_DIR/labels.txt"
    say "labels: $labels"
    echo "$labels"
    if [ -n "$failed" ] && [ -z "${RUNNER_DIR:-}" ]; then
        fail "$failed" "$failed_status"
    fi
else
    failed=""
    failed_status=$provisioned
fi

# ---------------------------------------------------------------------------- step 5
if [ -z "${RUNNER_DIR:-}" ]; then
    # PROVISION_FOR_RUNNER: the run as the runner's user, for root's step 5 (above).
    [ -n "${PROVISION_FOR_RUNNER:-}" ] || say "RUNNER_DIR not given: not registering a runner"
    exit 0
fi
can_root=yes
[ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null || can_root=""
service_fix="sudo sh -c 'cd $RUNNER_DIR && ./svc.sh install $RUNNER_USER && ./svc.sh start'"
registered="$RUNNER_DIR/.jetson-install-labels"
service_running=""
if [ -f "$RUNNER_DIR/.runner" ] && [ "$(cat "$registered" 2>/dev/null)" = "$labels" ]; then
    say "runner already registered in $RUNNER_DIR with these labels"
else
    token() { tr -d '[:space:]' <"$RUNNER_TOKEN_FILE"; }
    if [ -f "$RUNNER_DIR/.runner" ]; then
        # Labels are set at registration only: stop, remove the local registration, register again.
        step="the runner's svc.sh stop"
        if [ -f "$RUNNER_DIR/.service" ]; then
            [ -n "$can_root" ] || fail "$step" 1 "re-labelling needs root: sudo $0 (as root it runs the rest as $RUNNER_USER)"
            (cd "$RUNNER_DIR" && "${as_root[@]}" ./svc.sh stop) >&2
            service_running=stopped
        fi
        step="the runner's config.sh remove --local"
        (cd "$RUNNER_DIR" && "${as_user[@]}" ./config.sh remove --local) >&2
        say "re-registering the runner: labels were $(cat "$registered" 2>/dev/null || echo unknown)"
    fi
    # The token goes to config.sh through its environment only (never argv, never a file of ours).
    step="the runner's config.sh"
    (
        cd "$RUNNER_DIR"
        ACTIONS_RUNNER_INPUT_TOKEN=$(token)
        export ACTIONS_RUNNER_INPUT_TOKEN
        "${as_user[@]}" ./config.sh --unattended \
            --url "$RUNNER_URL" --name "${RUNNER_NAME:-$(hostname)}" --labels "$labels" --replace
    ) >&2
    echo "$labels" >"$registered"
    say "runner registered in $RUNNER_DIR as $RUNNER_USER with labels $labels"
fi

# The service, started at boot (svc.sh writes a systemd unit that runs as RUNNER_USER).
if [ ! -f "$RUNNER_DIR/.service" ] || [ -n "$service_running" ]; then
    [ -n "$can_root" ] || fail "the runner's service" 1 "it needs root: $service_fix"
    if [ ! -f "$RUNNER_DIR/.service" ]; then
        step="the runner's svc.sh install $RUNNER_USER"
        (cd "$RUNNER_DIR" && "${as_root[@]}" ./svc.sh install "$RUNNER_USER") >&2
    fi
    step="the runner's svc.sh start"
    (cd "$RUNNER_DIR" && "${as_root[@]}" ./svc.sh start) >&2
    say "runner service started as $RUNNER_USER"
fi
if [ -n "$failed" ]; then
    fail "$failed" "$failed_status"
fi
[ "$failed_status" -eq 0 ] || exit "$failed_status"
