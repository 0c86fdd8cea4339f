#!/usr/bin/env bash
# Certificates for a TLS test cluster: a throwaway CA and a server
# certificate for 127.0.0.1 (an IP address name only) signed by it, in
# DIR/tls (ca.crt, server.crt, server.key owned by `postgres`, mode 0600).
# `cluster.sh start DIR PORT` then turns TLS on.
#
#   certs.sh DIR
set -euo pipefail
tls=$1/tls
mkdir -p "$tls"
cd "$tls"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 2 -subj /CN=toolhost-test-ca 2>/dev/null
openssl req "${ec[@]}" -keyout server.key -out server.csr -subj /CN=toolhost-test-server 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >san.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
    -days 2 -extfile san.ext 2>/dev/null
chown postgres: server.key server.crt
chmod 600 server.key
