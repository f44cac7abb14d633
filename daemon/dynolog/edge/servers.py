"""The daemon's life: start (log, IPC, gRPC), serve until a signal, stop cleanly."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import os
import resource
import signal
import socket
import sys
from pathlib import Path
from typing import List, Optional, Tuple

from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from dynocerts.keys import PasswordSource
from dynocerts.material import CertsError
from dynoproto import SERVICE
from msmonitor_contract import wire

from .. import __version__
from ..config import NO_CERTS, DaemonConfig, ignored_flag_warning
from ..core import logs
from ..incidents.watch import incident_settings
from ..ipc import endpoint
from ..ipc.dispatch import IpcDispatcher
from ..ipc.endpoint import IpcError
from ..monitoring.sinks import Sink, Sinks, jsonl, web_config
from ..monitoring.sinks.jsonl import JsonlSink
from ..monitoring.sinks.prometheus import PrometheusSink
from ..node import Node
from .auth import AccessPolicy, AuthInterceptor, RefusalLog
from .legacy.service import Authorization, LegacyService
from .limits import ClientLimiter, LimitInterceptor, Limits
from .port.gate import Gate
from .port.listener import HANDSHAKE_TIMEOUT_S, Port
from .rpc.servicer import DynologService
from .tls import ServerTls

log = logging.getLogger("dynolog")


class StartupError(RuntimeError):
    """A reason the daemon cannot start, worded for the operator."""


class Daemon:
    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.node: Optional[Node] = None
        self.ipc: Optional[IpcDispatcher] = None
        self.port: int = 0
        self._server: Optional[aio.Server] = None
        self._port: Optional[Port] = None
        self._health = health.aio.HealthServicer()  # type: ignore[attr-defined]
        self._stopping = asyncio.Event()
        self._refusals = RefusalLog()

    async def run(self) -> None:
        # Before the start: a supervisor may stop the daemon the moment it says it is ready, and the
        # default action of SIGTERM would leave its socket file behind.
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopping.set)
        try:
            await self.start()
        except BaseException:
            await self.stop()  # a failed start leaves no socket file, listener or sink behind
            raise
        try:
            await self._stopping.wait()
        finally:
            await self.stop()

    async def start(self) -> None:
        config = self.config
        _raise_open_files_limit()
        tls = self._check_transport()
        if config.enable_ipc_monitor:
            sinks = self._sinks()
            self.node = Node.build(config.process_keepalive_s, sinks, incident_settings(config))
            for sink in sinks.sinks:
                if isinstance(sink, PrometheusSink):
                    sink.daemon_drops = self.node.drops.snapshot
            self.ipc = IpcDispatcher(
                self.node, config.ipc_allowed_uids, config.trace_roots, config.max_ipc_clients
            )
            try:
                self.ipc.open(asyncio.get_running_loop(), self._ipc_addresses())
            except IpcError as exc:
                raise StartupError(str(exc)) from None
        limiter = self._limiter()
        self._port = Port(*self._gates()) if config.legacy_rpc else None
        self._server = self._build_server(tls, limiter)
        if self._port is not None:
            self.port = await self._open_port(tls, limiter)
        else:
            try:
                _probe(config.listen_address, config.port)
            except OSError as exc:
                raise _cannot_listen(config.grpc_target, exc) from None
            self.port = self._add_grpc_port(config.grpc_target, tls)
        await self._server.start()
        for name in ("", SERVICE):
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        _warn_long_socket_dir(config.ipc_socket_dir)
        ipc = ", ".join(e.describe() for e in self.ipc.endpoints) if self.ipc else "off"
        log.info(
            "dynolog %s serving gRPC%s on %s:%d, IPC %s",
            __version__,
            " and the legacy JSON RPC" if self._port is not None else "",
            config.listen_address,
            self.port,
            ipc,
        )
        # One line on stdout for supervisors and tests: the daemon is ready, and where.
        print(f"dynolog ready grpc={config.listen_address}:{self.port} ipc={ipc}", flush=True)

    async def stop(self) -> None:
        if self._port is not None:
            await self._port.close()
            self._port = None
        if self._server is not None:
            await self._server.stop(grace=1.0)
            self._server = None
        if self.ipc is not None:
            self.ipc.close()
            self.ipc = None
        if self.node is not None:
            self.node.close()
            self.node = None
        log.info("dynolog stopped")

    def _sinks(self) -> Sinks:
        """The metric sinks the flags ask for; an unusable one stops the start with its reason."""
        config = self.config
        sinks: List[Sink] = []
        try:
            if config.metric_log_dir is not None:
                sinks.append(_tensorboard_sink(config.metric_log_dir))
            if config.prometheus_port:
                sinks.append(_prometheus_sink(config))
            elif config.prometheus_web_config is not None:
                log.warning("--prometheus-web-config has no effect without --prometheus-port")
            if config.use_json and config.log_file is not None:
                sinks.append(JsonlSink(jsonl.beside(config.log_file)))
        except OSError as exc:
            raise StartupError(f"cannot open a metric sink: {exc.strerror or exc}") from None
        return Sinks(sinks)

    def _ipc_addresses(self) -> List[Tuple[wire.Address, str]]:
        addresses = [
            (wire.endpoint_address(wire.DAEMON_ENDPOINT, self.config.ipc_socket_dir), endpoint.DYNOLOG)
        ]
        msmonitor_dir = self.config.msmonitor_socket_dir
        if msmonitor_dir:
            addresses += [
                (os.path.join(msmonitor_dir, wire.MSMONITOR_CONTROL_SOCKET), endpoint.MSMONITOR),
                (os.path.join(msmonitor_dir, wire.MSMONITOR_DATA_SOCKET), endpoint.MSMONITOR_DATA),
            ]
        return addresses

    def _check_transport(self) -> Optional[ServerTls]:
        """The checked TLS set, or None for plaintext, which beyond loopback needs NO_CERTS."""
        certs_dir = self.config.certs_dir
        if certs_dir is not None and certs_dir != NO_CERTS:
            return self._load_certificates(Path(certs_dir))
        if certs_dir is None and not _is_loopback(self.config.listen_address):
            raise StartupError(
                f"refusing to serve plaintext gRPC on {self.config.listen_address} without certificates: "
                f"give --certs-dir DIR for mutual TLS, or --certs-dir {NO_CERTS} to accept plaintext"
            )
        if certs_dir == NO_CERTS and not _is_loopback(self.config.listen_address):
            log.warning(
                "serving plaintext gRPC on %s (--certs-dir NO_CERTS): anyone who can reach it can "
                "trace this node",
                self.config.listen_address,
            )
        return None

    def _load_certificates(self, certs_dir: Path) -> ServerTls:
        passwords = PasswordSource(self.config.key_password_file, ("DYNOLOG_KEY_PASSWORD",))
        try:
            return ServerTls.from_dir(certs_dir, passwords, _host_names(self.config))
        except CertsError as exc:
            raise StartupError(str(exc)) from None

    def _add_grpc_port(self, target: str, tls: Optional[ServerTls]) -> int:
        assert self._server is not None
        try:
            if tls is None:
                port = self._server.add_insecure_port(target)
            else:
                port = self._server.add_secure_port(target, tls.credentials())
        except RuntimeError:
            port = 0
        if port == 0:
            raise StartupError(f"cannot listen on {target}: the port is in use or the address is not local")
        return port

    async def _open_port(self, tls: Optional[ServerTls], limiter: Optional[ClientLimiter]) -> int:
        """The port clients dial, in front of gRPC on a loopback port of its own (see dynolog.edge.port)."""
        config = self.config
        assert self._port is not None
        grpc_port = self._add_grpc_port(f"{_GRPC_BEHIND}:0", tls)
        authorization = (
            Authorization(self._access_policy(), tls.revocations.revocation, self._refusals)
            if tls is not None
            else None
        )
        service = LegacyService(self.node, authorization, limiter, config.trace_roots)
        try:
            return await self._port.start(
                config.listen_address, config.port, service, (_GRPC_BEHIND, grpc_port), tls
            )
        except OSError as exc:
            raise _cannot_listen(config.grpc_target, exc) from None

    def _access_policy(self) -> AccessPolicy:
        config = self.config
        return AccessPolicy(
            tuple(config.operator_clients) if config.operator_clients is not None else None,
            tuple(config.read_only_clients),
        )

    def _gates(self) -> Tuple[Optional[Gate], Optional[Gate]]:
        """The port's gates: new legacy JSON RPC connections, new TLS connections (of either kind)."""
        config = self.config
        legacy = Limits(
            config.legacy_connection_rate,
            config.legacy_connection_burst,
            0,
            "--legacy-connection-rate, --legacy-connection-burst",
        )
        tls = Limits(
            config.tls_handshake_rate,
            config.tls_handshake_burst,
            0,
            "--tls-handshake-rate, --tls-handshake-burst",
        )
        return Gate.of(legacy, "a legacy JSON RPC connection"), Gate.of(tls, "a TLS connection")

    def _limiter(self) -> Optional[ClientLimiter]:
        config = self.config
        limits = Limits(config.client_rate_limit, config.client_rate_burst, config.max_client_streams)
        return ClientLimiter(limits) if limits.enabled else None

    def _interceptors(
        self, tls: Optional[ServerTls], limiter: Optional[ClientLimiter]
    ) -> List[aio.ServerInterceptor]:
        """Authorization first (plaintext has no identity to authorize), then the client's limits."""
        interceptors: List[aio.ServerInterceptor] = []
        if tls is not None:
            interceptors.append(
                AuthInterceptor(self._access_policy(), tls.revocations.revocation, self._refusals)
            )
        if limiter is not None:
            peer_address = self._port.peers.address if self._port is not None else str
            interceptors.append(LimitInterceptor(limiter, peer_address))
        return interceptors

    def _build_server(self, tls: Optional[ServerTls], limiter: Optional[ClientLimiter]) -> aio.Server:
        server = aio.server(interceptors=self._interceptors(tls, limiter), options=SERVER_OPTIONS)
        DynologService(self.node, self.ipc, tls is not None, self.config.trace_roots).serve_on(server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection(
            (SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
            server,
        )
        return server


# Where gRPC listens behind the port (dynolog.edge.port relays to it): loopback only, any free port.
_GRPC_BEHIND = "127.0.0.1"

SERVER_OPTIONS = [
    # No SO_REUSEPORT: a second daemon on the same port must fail, not share the traffic.
    ("grpc.so_reuseport", 0),
    # Ping every client every second, also on a quiet call, and drop one that has not answered within
    # 2 s: a `dyno dynamic` whose host vanished, or that hangs, frees the processes it holds within
    # about 3 s, as a killed one does (its connection closes at once).
    ("grpc.keepalive_time_ms", 1000),
    ("grpc.http2.ping_timeout_ms", 2000),
    ("grpc.http2.max_pings_without_data", 0),
    # A TLS handshake not finished within this is closed (gRPC's default: 120 s). Behind the port, which
    # closes its relays first (and says so), this matters with --legacy-rpc=off, where gRPC listens itself.
    ("grpc.server_handshake_timeout_ms", int((HANDSHAKE_TIMEOUT_S + 5) * 1000)),
]

# sun_path holds 107 bytes; Kineto's client socket is <dir>/dynoconfigclient<36-char uuid>.
_KINETO_CLIENT_NAME_LEN = len("/dynoconfigclient") + 36


def _raise_open_files_limit() -> None:
    """Up to the hard limit: every connection to the port holds a descriptor until it is told apart, and
    a flood of them must not leave none for the IPC sockets, sinks and files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            log.warning("could not raise the open files limit from %d to %d", soft, hard)


def _warn_long_socket_dir(socket_dir: str) -> None:
    if socket_dir and len(os.fsencode(socket_dir)) + _KINETO_CLIENT_NAME_LEN > 107:
        log.warning(
            "--ipc-socket-dir %s is longer than %d bytes: stock Kineto clients cannot bind their sockets "
            "there (the socket path limit is 107 bytes); choose a shorter directory",
            socket_dir,
            107 - _KINETO_CLIENT_NAME_LEN,
        )


def _host_names(config: DaemonConfig) -> List[str]:
    """Names clients may dial this daemon by, to warn when the server certificate names none."""
    names = [socket.gethostname(), socket.getfqdn()]
    if _is_loopback(config.listen_address):
        names += ["localhost", config.listen_address]
    elif config.listen_address not in ("0.0.0.0", "::", ""):
        names.append(config.listen_address)
    return list(dict.fromkeys(names))


def _cannot_listen(target: str, exc: OSError) -> StartupError:
    hint = " (is another dynolog running?)" if exc.errno == errno.EADDRINUSE else ""
    return StartupError(f"cannot listen on {target}: {exc.strerror or exc}{hint}")


def _probe(host: str, port: int) -> None:
    """Bind what gRPC is about to bind, and let go: a port in use is then said in one line of ours, not
    first in the log gRPC's C core writes on stderr."""
    if port == 0:
        return
    for family, kind, proto, _, address in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    ):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            probe.bind(address)


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _prometheus_sink(config: DaemonConfig) -> Sink:
    """The exporter, protected as --prometheus-web-config says; a bad file stops the start."""
    web = None
    if config.prometheus_web_config is not None:
        try:
            web = web_config.load(config.prometheus_web_config)
        except (web_config.WebConfigError, ImportError) as exc:
            raise StartupError(str(exc)) from None
        if not web.protects:
            what = "neither TLS nor users" if web.tls is None else (
                "no users, and TLS that does not require a verified client certificate "
                "(client_auth_type: RequireAndVerifyClientCert)")  # fmt: skip
            log.warning("--prometheus-web-config %s sets %s: anyone who can connect reads the exporter",
                        web.path, what)  # fmt: skip
        elif web.tls is None and not _is_loopback(config.prometheus_address):
            log.warning("--prometheus-web-config %s: basic auth without tls_server_config sends the "
                        "passwords in clear to %s", web.path, config.prometheus_address)  # fmt: skip
    return PrometheusSink(config.prometheus_address, config.prometheus_port, web=web)


def _tensorboard_sink(log_dir: Path) -> Sink:
    """Only when asked: a heavy import, and an optional extra (tensorboardX brings numpy)."""
    try:
        from ..monitoring.sinks.tensorboard import TensorBoardSink
    except ImportError as exc:
        raise StartupError(
            f"--metric-log-dir needs tensorboardX, which is not installed ({exc}): "
            "pip install 'msmonitor-dynolog[tensorboard]'"
        ) from None
    return TensorBoardSink(log_dir)


async def _serve(config: DaemonConfig) -> None:
    # The daemon is made inside the loop: on Python 3.9 an asyncio.Event binds to the loop current when
    # it is made, and one made before asyncio.run would belong to another loop.
    await Daemon(config).run()


def _say(level: int, line: str, on_stderr: bool) -> None:
    """*line* in the log, and on stderr unless the log goes there already."""
    log.log(level, "%s", line)
    if not on_stderr:
        print(f"dynolog: {line}", file=sys.stderr)


def run(config: DaemonConfig) -> int:
    try:
        on_stderr = logs.configure(config.log_file or Path(), config.log_level, config.logtostderr)
    except OSError as exc:
        print(f"dynolog: cannot write the log file {config.log_file}: {exc.strerror}", file=sys.stderr)
        return 1
    for name in config.ignored_flags:  # on stderr too, where whoever starts the daemon looks
        _say(logging.WARNING, ignored_flag_warning(name), on_stderr)
    try:
        asyncio.run(_serve(config))
    except StartupError as exc:
        for line in str(exc).splitlines():  # certificate problems come one per line
            _say(logging.ERROR, line, on_stderr)
        return 1
    finally:
        logs.shutdown()
    return 0
