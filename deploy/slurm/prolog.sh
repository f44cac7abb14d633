#!/bin/sh
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/msmonitor/prolog.sh): runs as root on each node of a job
# before its first step. It starts the node's dynolog if it is down, and makes the job's trace folder
# under the daemon's --trace-root, owned by the job's user, so that
#   dyno nputrace --log-file "$MSMONITOR_TRACE_ROOT/<job id>" ...
# lands where the job may write and the daemon allows. It always exits 0: a failing Prolog drains the
# node, and monitoring must never cost a job its nodes.
trace_root=${MSMONITOR_TRACE_ROOT-/data/traces}
unit=${DYNOLOG_UNIT-dynolog}

log() {
    logger -t msmonitor-prolog -- "$*" 2>/dev/null || echo "msmonitor-prolog: $*" >&2
}

if [ -n "$unit" ] && command -v systemctl >/dev/null 2>&1; then
    if ! systemctl is-active --quiet "$unit"; then
        systemctl start --no-block "$unit" || log "cannot start $unit"
    fi
fi

job=${SLURM_JOB_ID-}
case $job in
    '' | *[!0-9]*) exit 0 ;; # not a job id: nothing to name a folder after
esac
if [ -n "$trace_root" ] && [ -d "$trace_root" ] && [ -n "${SLURM_JOB_UID-}" ]; then
    install -d -o "$SLURM_JOB_UID" -g "${SLURM_JOB_GID:-$SLURM_JOB_UID}" -m 0750 "$trace_root/$job" ||
        log "cannot make $trace_root/$job"
fi
exit 0
