"""``dyno respond``: an Alertmanager webhook receiver that traces the whole job an alert names."""

from __future__ import annotations

import ipaddress
import math
import signal
import socket
import sys
import threading
import time
from argparse import Namespace
from typing import Any, Tuple

from msmonitor_contract.numbers import strict_int

from ..exits import EXIT_USAGE, CliError
from ..flags import WAIT_TIMEOUT, Command, Flag, directory
from ..fleet.target import Target
from ..respond import ENV
from ..respond.jobs import hosts_from
from ..respond.store import rate_limit

DEFAULT_LISTEN = "127.0.0.1:9465"
STOP_WAIT_S = 30.0  # on SIGTERM, for the incident in progress to be recorded


def _request_timeout(text: str) -> float:
    """Seconds, finite (a NaN would pass the range check and then fail every request's deadline)."""
    from msmonitor_contract.values import FlagValueError

    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds):
        raise FlagValueError(f"expected a number of seconds, got {text!r}")
    return seconds


FLAGS = (
    Flag(
        "--listen",
        None,
        str,
        DEFAULT_LISTEN,
        "HOST:PORT to receive Alertmanager's webhook on (POST /alerts; port 0: any free one, logged)",
    ),
    Flag(
        "--hosts-from",
        None,
        hosts_from,
        None,
        "where a job's hosts are: slurm (scontrol), kubernetes[:SELECTOR] (the nodes of its pods; default "
        "selector msmonitor.io/job-id={job}), or file:PATH (a host file)",
        required=True,
    ),
    Flag("--iterations", None, int, 3, "steps to trace on every rank", minimum=1),
    Flag(
        "--collect",
        None,
        directory,
        None,
        f"folder of the incidents here: DIR/incidents.sqlite and DIR/<id>/ (incident.json, traces/); "
        f"default ${ENV}",
    ),
    Flag("--max", None, rate_limit, "2/hour", "traced incidents at most, N/minute, N/hour or N/day"),
    Flag(
        "--token-file",
        None,
        str,
        None,
        "the bearer token Alertmanager sends (its http_config authorization credentials_file); owner-only; "
        "required to listen beyond loopback",
    ),
    Flag("--max-body", None, int, "1048576", "bytes a notification may have (413 beyond)", minimum=1),
    Flag(
        "--request-timeout",
        None,
        _request_timeout,
        "10",
        "seconds a request may take to arrive whole (request line, headers, body), however slowly its bytes "
        "come: answered 408 and closed after (a slow client holds a connection no longer)",
        minimum=0.1,
        maximum=3600,
        metavar="FLOAT",
    ),
    Flag(
        "--dry-run", None, bool, False, "record the hosts, processes, start step and request; trace nothing"
    ),
    Flag("--alert", None, str, None, "only alerts of this alertname (default: every one)", repeat=True),
    Flag(
        "--log-file",
        None,
        str,
        "/tmp/msmonitor-respond",
        "folder on the nodes the ranks write their traces into (a folder per incident below it)",
    ),
    WAIT_TIMEOUT._replace(help="seconds a capture waits for every rank's files"),
)


def run(target: Target, args: Namespace) -> None:
    """An Alertmanager webhook receiver: each alert's job traced on every rank at the same steps.

    Example: dyno --certs-dir ~/pki/client respond --hosts-from slurm --iterations 3 \\
               --collect /data/incidents --max 2/hour --token-file /etc/msmonitor/webhook.token
    Each firing alert with a job id label (job_id, job or exported_job) becomes one incident: the
    job's hosts from --hosts-from, one nputrace with one start step for every rank (--analyse), the
    files collected into DIR/<id>/traces/ as HolisticTraceAnalysis reads a job, the slowest rank named.
    Repeats of an alert count on its incident; a resolved alert is recorded, nothing sent.
    Read them: dyno incidents --from DIR --job 77 (or with $DYNO_INCIDENTS=DIR).
    """
    from ..respond import capture, responder, store, webhook

    address = _listen_address(args.listen, args.token_file is not None)
    if not _loopback(address[0]):
        _log(
            f"--listen {args.listen}: plain HTTP beyond loopback, the token unencrypted on the wire: keep "
            "Alertmanager on a trusted network, or put a TLS proxy in front"
        )
    token = webhook.TokenFile(args.token_file, _log) if args.token_file else None
    folder = store.folder_from(args.collect, "--collect")
    if target.tls:  # a bad --certs-dir is a usage error now, not every incident's
        from ..edge.connection import credentials

        credentials(target)
    settings = responder.Settings(
        hosts_from=args.hosts_from,
        capture=capture.CaptureSettings(args.iterations, args.log_file, args.wait_timeout),
        limit=args.max,
        dry_run=args.dry_run,
        alert_names=tuple(args.alert),
    )
    records = store.JobIncidentStore(folder)
    worker = responder.Responder(target, settings, records, _log)
    try:
        limits = webhook.Limits(args.max_body, args.request_timeout)
        server = webhook.Webhook(address, token, worker.submit, _log, limits)
    except OSError as exc:
        raise CliError(f"--listen {args.listen}: {exc.strerror}", EXIT_USAGE) from None
    worker.start()
    _serve(
        server, f"http://{args.listen.rpartition(':')[0]}:{server.port}{webhook.PATH}", folder, args.dry_run
    )
    worker.stop(STOP_WAIT_S)
    records.close()


def _serve(server: Any, url: str, folder: str, dry_run: bool) -> None:
    """Serve until SIGTERM or SIGINT."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, name="dyno-respond-http", daemon=True)
    thread.start()
    mode = " (dry run: nothing is traced)" if dry_run else ""
    _log(f"listening on {url}{mode}; incidents in {folder} (dyno incidents --from {folder})")
    stop.wait()
    _log("stopping")
    server.shutdown()
    server.server_close()


def _listen_address(text: str, has_token: bool) -> Tuple[str, int]:
    host, _, port = text.rpartition(":")
    host, number = host.strip("[]"), strict_int(port)  # [::1]:9465
    if not host or number is None or number > 65535:
        raise CliError(
            f"--listen {text!r}: expected HOST:PORT (port 0: any free one), e.g. {DEFAULT_LISTEN}", EXIT_USAGE
        )
    if not has_token and not _loopback(host):
        raise CliError(
            f"--listen {text}: anyone who reaches it could have jobs traced: listening beyond loopback needs "
            "--token-file (the bearer token Alertmanager's http_config sends)",
            EXIT_USAGE,
        )
    return host, number


def _loopback(host: str) -> bool:
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror as exc:
        raise CliError(f"--listen {host}: {exc.strerror}", EXIT_USAGE) from None
    return all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)


_log_lock = threading.Lock()


def _log(line: str) -> None:
    """One line on stdout, with the UTC time; from any thread."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with _log_lock:
        sys.stdout.write(f"{stamp} dyno respond: {line}\n")
        sys.stdout.flush()


COMMAND = Command("respond", run, FLAGS)
