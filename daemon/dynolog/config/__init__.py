"""Daemon settings and their command line, in the spellings dynolog and msMonitor document: the settings
(:mod:`.settings`), each declared with its flag (:mod:`.flags`); the gflags-style command line and
flagfiles (:mod:`.command_line`); the C++ daemons' flags accepted with a warning (:mod:`.upstream`).
"""

from .command_line import build_parser, expand_flagfiles, parse_args
from .settings import NO_CERTS, DaemonConfig, default_log_file, user_state_dir
from .upstream import IGNORED_UPSTREAM_FLAGS, ignored_flag_warning

__all__ = [
    "IGNORED_UPSTREAM_FLAGS",
    "NO_CERTS",
    "DaemonConfig",
    "build_parser",
    "default_log_file",
    "expand_flagfiles",
    "ignored_flag_warning",
    "parse_args",
    "user_state_dir",
]
