#!/bin/sh
# Slurm Epilog (slurm.conf: Epilog=/etc/slurm/msmonitor/epilog.sh): runs as root on each node after the
# job. It removes the job's trace folder that prolog.sh made if no trace was written into it; traces
# stay for their user. The daemon forgets the job's processes by itself as they exit. Always exits 0:
# a failing Epilog drains the node.
trace_root=${MSMONITOR_TRACE_ROOT-/data/traces}
job=${SLURM_JOB_ID-}
case $job in
    '' | *[!0-9]*) exit 0 ;;
esac
if [ -n "$trace_root" ] && [ -d "$trace_root/$job" ]; then
    rmdir "$trace_root/$job" 2>/dev/null || true
fi
exit 0
