#!/bin/sh
# A test CA, a broker certificate and a client certificate, with openssl.
# Usage: examples/tls/make_test_ca.sh DIR [BROKER_HOST] [CLIENT_USER]
# For tests and trials only: a production broker gets its certificate from your CA.
set -eu
dir=${1:?usage: make_test_ca.sh DIR [BROKER_HOST] [CLIENT_USER]}
host=${2:-localhost}
user=${3:-guest}
mkdir -p "$dir" && cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=logbroker test CA" \
    -keyout ca.key -out ca.pem 2>/dev/null
leaf() {  # name subject extensions
    openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
    printf '%s\n' "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
        -extfile "$1.ext" -out "$1.pem" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
case $host in
    *[!0-9.]*) san="DNS:$host" ;;
    *) san="IP:$host" ;;
esac
leaf server "/CN=$host" "subjectAltName=$san,DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
leaf client "/CN=$user" "extendedKeyUsage=clientAuth"
chmod 600 ./*.key
echo "made $dir/ca.pem, server.pem + server.key (for $host), client.pem + client.key (CN=$user)"
