"""The wires to a daemon, the only modules that know them: gRPC (:mod:`.rpc`, over :mod:`.connection`)
and the C++ daemons' JSON RPC (:mod:`.legacy`, :mod:`.legacy_commands`). They take and give the
client's model (:mod:`dyno.model`) and the kinds' requests."""
