/* libpq, PostgreSQL's own client library (it links the system OpenSSL, so the
 * project keeps one crypto stack). Only Sources/WebAuthnPostgres uses it. */
#include <libpq-fe.h>
