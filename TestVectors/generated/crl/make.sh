#!/usr/bin/env bash
# Makes a CA, two leaves and a CRL from that CA that revokes one of them,
# with the openssl CLI, for the engine's CRL tests. Run once; outputs are
# committed as data.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/newcerts" && : > "$work/index.txt" && echo 1000 > "$work/serial" && echo 1000 > "$work/crlnumber"
cat > "$work/ca.cnf" <<CNF
[ ca ]
default_ca = test
[ test ]
dir = $work
database = $work/index.txt
new_certs_dir = $work/newcerts
serial = $work/serial
crlnumber = $work/crlnumber
default_md = sha256
default_crl_days = 36500
policy = any
copy_extensions = none
[ any ]
countryName = optional
organizationName = optional
organizationalUnitName = optional
commonName = optional
[ leaf ]
basicConstraints = CA:FALSE
CNF
openssl ecparam -name prime256v1 -genkey -noout -out "$work/ca.key"
openssl req -x509 -new -key "$work/ca.key" -days 36500 -subj "/C=AA/O=Test Vendor/CN=CRL Test CA" -out ca.pem
for name in revoked good; do
  openssl ecparam -name prime256v1 -genkey -noout -out "$work/$name.key"
  openssl req -new -key "$work/$name.key" -subj "/C=AA/O=Test Vendor/OU=Authenticator Attestation/CN=$name" -out "$work/$name.csr"
  openssl ca -batch -config "$work/ca.cnf" -cert ca.pem -keyfile "$work/ca.key" -in "$work/$name.csr" -out "$name.pem" \
    -startdate 20240101000000Z -enddate 21000101000000Z -extensions leaf -notext
done
openssl ca -config "$work/ca.cnf" -cert ca.pem -keyfile "$work/ca.key" -revoke revoked.pem
openssl ca -config "$work/ca.cnf" -cert ca.pem -keyfile "$work/ca.key" -gencrl -out "$work/ca.crl.pem"
openssl crl -in "$work/ca.crl.pem" -outform DER -out ca.crl
