"""The legacy edge: dynolog's and msMonitor's JSON RPC (:mod:`dynoproto.legacy`), served on the gRPC
port (:mod:`dynolog.edge.port` tells the protocols apart) through the same command model, admission,
authorization, rate limits and pipeline as gRPC. ``request`` reads a request, ``answer`` writes the
reply both CLIs parse, ``service`` decides."""
