"""`make demo`: the whole system on this machine, as a user would drive it.

Makes development certificates, starts dynolog with mutual TLS, starts a small real PyTorch training
job with the plugin switched on by one environment variable, then runs the dyno commands an engineer
would and prints what they print. Everything it starts is stopped, and its files are removed, at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List

BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parent
COMMAND_S = 30  # each dyno command's bound: a stuck one is reported, and the demo goes on to clean up
BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")


def say(text: str) -> None:
    print(f"\n{BOLD}== {text}{RESET}", flush=True)


def run(*args: str, show: str = "", stdin: str = "") -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """Run a command, echoing it first as the user would type it; *stdin* is what is typed into it."""
    print(f"{DIM}$ {show or ' '.join(args)}{RESET}", flush=True)
    try:
        result = subprocess.run(
            [str(BIN / args[0]), *args[1:]],
            input=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_S,
        )
    except subprocess.TimeoutExpired as late:  # the demo goes on, saying so: it never hangs
        output = late.stdout.decode() if isinstance(late.stdout, bytes) else late.stdout or ""
        print(f"{output}demo: no answer within {COMMAND_S} s: stopped it", flush=True)
        return subprocess.CompletedProcess(late.cmd, 124, output)
    sys.stdout.write(result.stdout)
    sys.stdout.flush()
    return result


def wait_for_line(proc: subprocess.Popen, prefix: str, timeout: float = 60) -> str:  # type: ignore[type-arg]
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line.strip()
    raise SystemExit(f"demo: no '{prefix}' line from {proc.args}")


def start_daemon(work: Path, sockets: Path, started: List[subprocess.Popen]) -> str:  # type: ignore[type-arg]
    """dynolog with the demo's certificates, added to *started* at once; the port it listens on."""
    daemon = subprocess.Popen(
        [
            str(BIN / "dynolog"),
            "--enable-ipc-monitor",
            "--port",
            "0",
            "--certs-dir",
            str(work / "pki/server"),
            "--ipc-socket-dir",
            str(sockets),
            "--msmonitor-socket-dir",  # not the user's $HOME: a daemon may already serve it
            str(sockets),
            "--log-file",
            str(work / "dynolog.log"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started.append(daemon)
    ready = wait_for_line(daemon, "dynolog ready")
    print(ready)
    return ready.split("grpc=")[1].split()[0].rsplit(":", 1)[1]


def start_job(sockets: Path, started: List[subprocess.Popen]) -> subprocess.Popen:  # type: ignore[type-arg]
    """examples/train.py with the plugin on, added to *started* at once, once it trains."""
    env = {**os.environ, "MSMONITOR_USE_DAEMON": "1", "KINETO_IPC_SOCKET_DIR": str(sockets), "RANK": "0"}
    job = subprocess.Popen(
        [sys.executable, str(HERE / "train.py")],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    started.append(job)
    print(wait_for_line(job, "training"))
    return job


def wait_registered(dyno: List[str]) -> None:
    """Until `dyno processes` lists the job, for ten seconds at most (the demo goes on either way)."""
    for _ in range(100):  # the plugin registers from its own thread within moments
        listed = subprocess.run(
            [str(BIN / dyno[0]), *dyno[1:], "--json", "processes"], capture_output=True, text=True
        )
        if listed.returncode == 0 and json.loads(listed.stdout or "[]"):
            break
        time.sleep(0.1)


def watch_a_while(dyno: List[str]) -> None:
    """`dyno npu-monitor --watch` for three seconds, ended with Ctrl-C as a user ends it; its last table."""
    watch = subprocess.Popen(
        [str(BIN / dyno[0]), *dyno[1:], "npu-monitor", "--watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = watch.communicate(timeout=3.5)
    except subprocess.TimeoutExpired:
        watch.send_signal(signal.SIGINT)
        try:
            output, _ = watch.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # the demo never hangs: it says so and goes on
            watch.kill()
            output = watch.communicate()[0] + "\ndemo: --watch did not end on Ctrl-C within 5 s: stopped it"
    tables = output.split("npu-monitor — ")
    print("npu-monitor — " + tables[-1][:2500] if len(tables) > 1 else output[:2500])


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="msmon-demo-"))
    sockets = Path(tempfile.mkdtemp(prefix="mm", dir="/tmp"))  # short: socket paths hold 107 bytes
    started: List[subprocess.Popen] = []  # type: ignore[type-arg]
    try:
        say("1. Development certificates for mutual TLS")
        run(
            "dyno",
            "certs",
            "init",
            str(work / "pki"),
            "--server-hosts",
            "localhost,127.0.0.1",
            "--client-name",
            "demo",
            "--key-type",
            "ec-p256",
        )

        say("2. The node daemon: gRPC with mutual TLS, local IPC for the processes")
        port = start_daemon(work, sockets, started)
        dyno = ["dyno", "--port", port, "--certs-dir", str(work / "pki/client")]
        shown = "dyno --certs-dir pki/client"

        say("3. A PyTorch training job; MSMONITOR_USE_DAEMON=1 is the only change")
        job = start_job(sockets, started)
        wait_registered(dyno)

        say("4. What the daemon knows")
        run(*dyno, "status", show=f"{shown} status")
        run(*dyno, "processes", show=f"{shown} processes")

        say("5. Capture the next 3 steps of the running job, with a summary, and wait for the files")
        traces = work / "traces"
        traces.mkdir()
        result = run(
            *dyno,
            "nputrace",
            "--start-step",
            "-1",
            "--iterations",
            "3",
            "--log-file",
            str(traces),
            "--analyse",
            "--wait",
            show=f"{shown} nputrace --start-step -1 --iterations 3 --log-file {traces} --analyse --wait",
        )
        summaries = sorted(traces.glob("*/summary.txt"))
        if result.returncode == 0 and summaries:
            print(f"\n{DIM}$ head -12 {summaries[0]}{RESET}")
            print("".join(summaries[0].read_text().splitlines(keepends=True)[:12]))

        say("6. The same trigger dynolog users know: gputrace (the file lands where Kineto would write it)")
        run(
            *dyno,
            "gputrace",
            "--log-file",
            str(traces / "kineto.json"),
            "--iterations",
            "2",
            "--wait",
            show=f"{shown} gputrace --log-file {traces}/kineto.json --iterations 2 --wait",
        )

        say("7. Always-on monitoring: which kernels take the time, every second")
        run(
            *dyno,
            "npu-monitor",
            "--npu-monitor-start",
            "--report-interval-s",
            "1",
            "--mspti-activity-kind",
            "Kernel,API,Marker,Hccl",
            show=f"{shown} npu-monitor --npu-monitor-start --report-interval-s 1 "
            "--mspti-activity-kind Kernel,API,Marker,Hccl",
        )
        print(f"{DIM}$ {shown} npu-monitor --watch      (3 seconds of it){RESET}", flush=True)
        watch_a_while(dyno)
        run(
            *dyno,
            "nputrace",
            "--iterations",
            "1",
            "--log-file",
            str(traces),
            show=f"{shown} nputrace --iterations 1 --log-file {traces}     # refused: npu-monitor runs there",
        )
        run(*dyno, "npu-monitor", "--npu-monitor-stop", show=f"{shown} npu-monitor --npu-monitor-stop")

        say("8. A command nothing can take is 'ineffective', with the reason")
        run(
            *dyno,
            "nputrace",
            "--iterations",
            "1",
            "--log-file",
            str(traces),
            "--job-id",
            "4242",
            show=f"{shown} nputrace --iterations 1 --log-file {traces} --job-id 4242",
        )
        say("9. msprof's dynamic mode: a prompt on the running job; start and stop at will (scripted here)")
        script = "start\nsleep 1\nstatus\nstop\nquit\n"
        run(
            *dyno,
            "dynamic",
            "--pid",
            str(job.pid),
            "--output",
            str(traces / "prof"),
            stdin=script,
            show=f"printf '{script.encode('unicode_escape').decode()}' | {shown} dynamic --pid {job.pid} "
            f"--output {traces}/prof",
        )

        say("Done: stopping the job and the daemon, removing the demo's files")
        return 0
    finally:
        for proc in reversed(started):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(sockets, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
