#!/bin/sh
# Slurm TaskProlog (slurm.conf: TaskProlog=/etc/slurm/msmonitor/task_prolog.sh): runs as the job's user
# before each task, and every "export NAME=value" line it prints is set in the task's environment.
# MSMONITOR_JOB_ID is the job id processes register with: `dyno --job-id <job id>` then selects them
# even where SLURM_JOB_ID does not reach the process (a container, a launcher that clears the
# environment). A job that set its own keeps it.
job=${MSMONITOR_JOB_ID:-${SLURM_JOB_ID-}}
case $job in
    '' | *[!0-9]*) ;; # not a number: the plugin would read it as 0, so say nothing
    *) echo "export MSMONITOR_JOB_ID=$job" ;;
esac
# To start the plugin in every Python process of every job where it is installed:
# echo "export MSMONITOR_USE_DAEMON=1"
exit 0
