/*
 * OpenSSL 3, the project's only crypto and X.509 implementation.
 *
 * Swift imports OpenSSL's functions directly. The inline helpers below exist
 * only where Swift cannot call the API as written: the STACK_OF(X509) helpers
 * and OPENSSL_free are function-like macros, which the Swift importer skips.
 * Each helper is a one-line forward with no logic of its own.
 */
#ifndef WEBAUTHN_COPENSSL_SHIM_H
#define WEBAUTHN_COPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
/* TLS: only the tests' loopback HTTPS stand-in uses it (the engine fetches over URLSession/libcurl). */
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>

/* sk_X509_new_null() is a macro. */
static inline STACK_OF(X509) *webauthn_sk_X509_new_null(void) { return sk_X509_new_null(); }
/* sk_X509_push() is a macro; the stack does not take a reference on its own. */
static inline int webauthn_sk_X509_push(STACK_OF(X509) *sk, X509 *x) { return sk_X509_push(sk, x); }
/* sk_X509_free() is a macro; frees the stack, not the certificates. */
static inline void webauthn_sk_X509_free(STACK_OF(X509) *sk) { sk_X509_free(sk); }
/* sk_X509_num()/sk_X509_value() are macros. */
static inline int webauthn_sk_X509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *webauthn_sk_X509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
/* sk_X509_CRL_* are macros. */
static inline STACK_OF(X509_CRL) *webauthn_sk_X509_CRL_new_null(void) { return sk_X509_CRL_new_null(); }
static inline int webauthn_sk_X509_CRL_push(STACK_OF(X509_CRL) *sk, X509_CRL *c) { return sk_X509_CRL_push(sk, c); }
static inline void webauthn_sk_X509_CRL_free(STACK_OF(X509_CRL) *sk) { sk_X509_CRL_free(sk); }
/* OPENSSL_free() is a macro over CRYPTO_free(ptr, __FILE__, __LINE__). */
static inline void webauthn_openssl_free(void *p) { OPENSSL_free(p); }

/* EVP_PKEY_PUBLIC_KEY is a macro built from other macros, which Swift does not import. */
static inline int webauthn_evp_pkey_public_key_selection(void) { return EVP_PKEY_PUBLIC_KEY; }
static inline int webauthn_evp_pkey_keypair_selection(void) { return EVP_PKEY_KEYPAIR; }

#endif
