#!/bin/sh
# Prints the Secret "dynolog-certs" the DaemonSet reads its certificates from:
#   dyno certs init pki --server-hosts 'localhost,*.nodes.example.com' --client-name alice
#   dyno certs issue pki --client-name dynolog-probe
#   deploy/kubernetes/certs-secret.sh pki | kubectl apply -f -
# The server certificate is shared by every node: name localhost (the probes dial it) and whatever
# dyno users pass as --hostname. dynolog-probe is the probes' client, read-only by the daemon's flags.
# After `dyno certs revoke`, run it again (pki/server/ca.crl goes in too) and restart the DaemonSet.
set -eu
if [ "$#" -ne 1 ]; then
    echo "usage: $0 PKI_DIR (the directory dyno certs init made)" >&2
    exit 2
fi
pki=$1
set -- \
    --from-file=ca.crt="$pki/server/ca.crt" \
    --from-file=server.crt="$pki/server/server.crt" \
    --from-file=server.key="$pki/server/server.key" \
    --from-file=probe.crt="$pki/client-dynolog-probe/client.crt" \
    --from-file=probe.key="$pki/client-dynolog-probe/client.key"
if [ -f "$pki/server/ca.crl" ]; then
    set -- "$@" --from-file=ca.crl="$pki/server/ca.crl"
fi
exec kubectl create secret generic dynolog-certs --namespace="${NAMESPACE:-msmonitor}" "$@" \
    --dry-run=client --output=yaml
