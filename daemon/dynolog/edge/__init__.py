"""The network edge: the one TCP port (:mod:`.port`), TLS and its reload (:mod:`.tls`), the gRPC servicer
(:mod:`.rpc`) and the legacy JSON RPC (:mod:`.legacy`), and the rules every call passes at the door:
authentication and roles (:mod:`.auth`), rate limits (:mod:`.limits`), admission (:mod:`.admission`)."""
