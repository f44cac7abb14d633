"""Imported by ``msmonitor_plugin.pth`` at interpreter start when ``MSMONITOR_USE_DAEMON`` is set."""

import msmonitor_plugin

msmonitor_plugin.init()
