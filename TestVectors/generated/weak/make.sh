#!/usr/bin/env bash
# Makes certificate chains that are well-formed but weak, with the openssl CLI, for the engine's
# path validation tests (red team, round 26: each was trusted). Run once; outputs are committed
# as data.
#   root-p256.pem, root-rsa2048.pem, root-rsa1024.pem   roots (the last with a 1024-bit key)
#   leaf-sha256.pem       a P-256 leaf under root-p256, ecdsa-with-SHA256 (the control)
#   leaf-sha1.pem         a P-256 leaf under root-p256, ecdsa-with-SHA1
#   leaf-md5.pem          a P-256 leaf under root-rsa2048, md5WithRSAEncryption
#   leaf-sha1-rsa.pem     a P-256 leaf under root-rsa2048, sha1WithRSAEncryption
#   leaf-under-rsa1024.pem  a P-256 leaf under root-rsa1024, sha256WithRSAEncryption
#   inter-rsa1024.pem, leaf-under-inter.pem  root-p256 -> a 1024-bit RSA intermediate -> a P-256 leaf (SHA-256)
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n' > "$work/ca.ext"
printf 'basicConstraints=CA:FALSE\n' > "$work/leaf.ext"
root() { # name keyargs
  openssl genpkey $2 -out "$work/$1.key" 2>/dev/null
  openssl req -x509 -new -key "$work/$1.key" -sha256 -days 36500 -subj "/C=AA/O=Test Vendor/CN=Weak Test $1" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$1.pem"
}
issue() { # name issuer digest keyargs ext
  openssl genpkey $4 -out "$work/$1.key" 2>/dev/null
  openssl req -new -key "$work/$1.key" -subj "/C=AA/O=Test Vendor/OU=Authenticator Attestation/CN=Weak Test $1" -out "$work/$1.csr"
  openssl x509 -req -in "$work/$1.csr" -CA "$2.pem" -CAkey "$work/$2.key" -set_serial "0x$(openssl rand -hex 8)" -days 36500 \
    "-$3" -extfile "$work/$5.ext" -out "$1.pem"
}
ec="-algorithm EC -pkeyopt ec_paramgen_curve:P-256"
root root-p256 "$ec"
root root-rsa2048 "-algorithm RSA -pkeyopt rsa_keygen_bits:2048"
root root-rsa1024 "-algorithm RSA -pkeyopt rsa_keygen_bits:1024"
issue leaf-sha256 root-p256 sha256 "$ec" leaf
issue leaf-sha1 root-p256 sha1 "$ec" leaf
issue leaf-md5 root-rsa2048 md5 "$ec" leaf
issue leaf-sha1-rsa root-rsa2048 sha1 "$ec" leaf
issue leaf-under-rsa1024 root-rsa1024 sha256 "$ec" leaf
issue inter-rsa1024 root-p256 sha256 "-algorithm RSA -pkeyopt rsa_keygen_bits:1024" ca
issue leaf-under-inter inter-rsa1024 sha256 "$ec" leaf
