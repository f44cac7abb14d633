"""Exit codes of ``dyno`` — stable, for scripts — and the one error every failure is raised as."""

EXIT_FAILED = 1  # the daemon answered that the command was ineffective or failed
EXIT_USAGE = 2  # bad arguments (also what argparse uses)
EXIT_UNREACHABLE = 3  # no daemon answered at --hostname:--port
EXIT_INTERRUPTED = 130  # Ctrl-C while following a trace (which goes on): 128 + SIGINT, as a shell says


class CliError(Exception):
    """A failure ``dyno.main`` prints as ``dyno: message`` on stderr before exiting with *exit_code*.

    *reason* says in a word why a daemon could not be reached (refused, TLS, timeout, DNS): a fan-out
    counts its unreachable hosts by it.
    """

    def __init__(self, message: str, exit_code: int = EXIT_FAILED, reason: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.reason = reason
