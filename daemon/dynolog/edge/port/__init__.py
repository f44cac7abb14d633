"""The daemon's one TCP port: each connection waits in :mod:`.doorway` until its first bytes tell
what it speaks (:mod:`.sniff`), then is relayed to the gRPC server behind it (:mod:`.relay`) or
answered here in dynolog's and msMonitor's legacy JSON RPC, plaintext or inside TLS
(:mod:`.tls_stream`); :mod:`.listener` holds it together."""
