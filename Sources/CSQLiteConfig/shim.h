/* The system SQLite's process-wide settings, which Swift cannot set itself:
 * sqlite3_config() is variadic, and the Swift importer skips variadic C
 * functions. Only Sources/WebAuthnSQLite uses it (the store's statements go
 * through GRDB's own module of the same library). One-line forward, no logic. */
#ifndef WEBAUTHN_CSQLITECONFIG_SHIM_H
#define WEBAUTHN_CSQLITECONFIG_SHIM_H

#include <sqlite3.h>

/* Turns SQLite's memory statistics off: with them on, every allocation and
 * free takes one process-wide mutex, which the writer and the readers contend
 * for. Must run before SQLite is initialized (SQLITE_MISUSE after). */
static inline int webauthn_sqlite_disable_memstatus(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

#endif
