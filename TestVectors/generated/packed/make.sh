#!/usr/bin/env bash
# Makes the packed-attestation test certificates (WebAuthn L3 §8.2.1) with the
# openssl CLI. One attestation key signs every certificate's statement; each
# certificate breaks exactly one requirement. Run once; the outputs are
# committed as data (tests never run openssl). AAGUID used: 00112233-4455-6677-8899-aabbccddeeff.
set -euo pipefail
cd "$(dirname "$0")"
AAGUID_EXT="DER:04:10:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff"
OTHER_AAGUID_EXT="DER:04:10:ff:ff:ff:ff:ff:ff:ff:ff:ff:ff:ff:ff:ff:ff:ff:ff"
openssl ecparam -name prime256v1 -genkey -noout -out ca.key
openssl req -x509 -new -key ca.key -days 36500 -subj "/C=AA/O=Test Vendor/OU=Authenticator Attestation CA/CN=Test Attestation CA" -out ca.pem
openssl ecparam -name prime256v1 -genkey -noout -out attestation.key
openssl pkcs8 -topk8 -nocrypt -in attestation.key -out attestation.pk8.pem
SUBJ="/C=AA/O=Test Vendor/OU=Authenticator Attestation/CN=Test Authenticator"
cert() { # name subject extfile-lines...
  local name=$1 subj=$2; shift 2
  printf '%s\n' "$@" > "$name.ext"
  openssl req -new -key attestation.key -subj "$subj" -out "$name.csr"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" -days 36500 \
    -extfile "$name.ext" -out "$name.pem"
  rm "$name.csr" "$name.ext"
}
cert valid "$SUBJ" "basicConstraints=CA:FALSE" "1.3.6.1.4.1.45724.1.1.4=$AAGUID_EXT"
cert no-aaguid "$SUBJ" "basicConstraints=CA:FALSE"
cert wrong-ou "/C=AA/O=Test Vendor/OU=Something Else/CN=Test Authenticator" "basicConstraints=CA:FALSE"
cert no-country "/O=Test Vendor/OU=Authenticator Attestation/CN=Test Authenticator" "basicConstraints=CA:FALSE"
cert ca-true "$SUBJ" "basicConstraints=CA:TRUE"
cert no-basic-constraints "$SUBJ" "subjectKeyIdentifier=hash"
cert aaguid-critical "$SUBJ" "basicConstraints=CA:FALSE" "1.3.6.1.4.1.45724.1.1.4=critical,$AAGUID_EXT"
cert aaguid-mismatch "$SUBJ" "basicConstraints=CA:FALSE" "1.3.6.1.4.1.45724.1.1.4=$OTHER_AAGUID_EXT"
# Version 1: no extensions at all.
openssl req -new -key attestation.key -subj "$SUBJ" -out v1.csr
openssl x509 -req -in v1.csr -CA ca.pem -CAkey ca.key -set_serial 0x0101 -days 36500 -out version1.pem
rm v1.csr
# Expired: valid 2020-01-01..2020-12-31 (faketime-free: -not_before/-not_after need OpenSSL 3.4, so use a CA-signed cert with ca -startdate).
mkdir -p expired-ca/newcerts && : > expired-ca/index.txt && echo 1000 > expired-ca/serial
cat > expired-ca/ca.cnf <<CNF
[ ca ]
default_ca = test
[ test ]
dir = expired-ca
database = expired-ca/index.txt
new_certs_dir = expired-ca/newcerts
serial = expired-ca/serial
default_md = sha256
policy = any
copy_extensions = none
[ any ]
countryName = optional
organizationName = optional
organizationalUnitName = optional
commonName = optional
[ ext ]
basicConstraints = CA:FALSE
CNF
openssl req -new -key attestation.key -subj "$SUBJ" -out expired.csr
openssl ca -batch -config expired-ca/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr -out expired.pem \
  -startdate 20200101000000Z -enddate 20201231000000Z -extensions ext -notext
rm -rf expired.csr expired-ca
rm ca.key attestation.key
