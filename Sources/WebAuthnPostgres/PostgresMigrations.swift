internal import WebAuthnCore

/// The PostgreSQL schema, versioned in one place; migrations run once, in
/// order, in one transaction under an advisory lock shared by every instance.
enum PostgresMigrations {
    static let lockKey = "727274"  // any constant shared by all instances
    static let migrations: [(version: Int, statements: [String])] = [
        (
            1,
            [
                "CREATE TABLE accounts (name TEXT PRIMARY KEY, handle BYTEA NOT NULL UNIQUE, display_name TEXT NOT NULL)",
                """
                CREATE TABLE credentials (
                    id BYTEA PRIMARY KEY, user_handle BYTEA NOT NULL, public_key BYTEA NOT NULL, sign_count BIGINT NOT NULL,
                    transports TEXT NOT NULL, uv_initialized BOOLEAN NOT NULL, backup_eligible BOOLEAN NOT NULL, backup_state BOOLEAN NOT NULL,
                    aaguid BYTEA NOT NULL, attestation_format TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, last_used_at DOUBLE PRECISION
                )
                """,
                "CREATE INDEX credentials_by_user ON credentials (user_handle)",
                "CREATE TABLE challenges (challenge BYTEA PRIMARY KEY, ceremony TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL)",
            ]
        ),
        // Look-alike keys (filled by `afterStatements`), session-bound ceremonies swept by an
        // expiry index, signed-in sessions shared by every instance.
        (
            2,
            [
                "ALTER TABLE accounts ADD COLUMN name_key TEXT",
                "CREATE UNIQUE INDEX accounts_by_key ON accounts (name_key)",
                "ALTER TABLE challenges ADD COLUMN binding BYTEA",
                "CREATE INDEX challenges_by_expiry ON challenges (expires_at)",
                "CREATE INDEX challenges_by_binding ON challenges (binding, expires_at)",
                """
                CREATE TABLE sessions (
                    id_hash BYTEA PRIMARY KEY, user_handle BYTEA NOT NULL, created_at DOUBLE PRECISION NOT NULL,
                    authenticated_at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION NOT NULL
                )
                """,
                "CREATE INDEX sessions_by_user ON sessions (user_handle, created_at)",
                "CREATE INDEX sessions_by_expiry ON sessions (expires_at)",
            ]
        ),
        // Settings the servers keep with their data, such as a generated server secret.
        (
            3,
            [
                "CREATE TABLE settings (name TEXT PRIMARY KEY, value BYTEA NOT NULL)"
            ]
        ),
        // Identities linked from other providers (Sign in with Apple), unique by provider and subject.
        (
            4,
            [
                """
                CREATE TABLE identities (
                    provider TEXT NOT NULL, subject TEXT NOT NULL, user_handle BYTEA NOT NULL, email TEXT, email_verified BOOLEAN,
                    is_private_email BOOLEAN, refresh_token BYTEA, created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
                    PRIMARY KEY (provider, subject)
                )
                """,
                "CREATE INDEX identities_by_user ON identities (user_handle, created_at)",
            ]
        ),
        // The owner's name for a credential, and what its registration established (credProps, credProtect, PRF, ...).
        (
            5,
            [
                "ALTER TABLE credentials ADD COLUMN name TEXT",
                "ALTER TABLE credentials ADD COLUMN properties TEXT NOT NULL DEFAULT '{}'",
            ]
        ),
        // What a re-audit needs: the attestation certificates a credential was registered with,
        // and the flag an audit sets when metadata reports its authenticator compromised.
        (
            6,
            [
                "ALTER TABLE credentials ADD COLUMN attestation_chain BYTEA NOT NULL DEFAULT ''::bytea",
                "ALTER TABLE credentials ADD COLUMN flag TEXT",
            ]
        ),
        // A credential deleted only while its account keeps another way in: the account's row
        // locked, then counted with a snapshot taken after the lock (each statement of a PL/pgSQL
        // function takes its own), so that concurrent deletions of the last two cannot both pass.
        (
            7,
            [
                """
                CREATE FUNCTION webauthn_delete_credential(cid BYTEA, owner BYTEA) RETURNS INTEGER LANGUAGE plpgsql AS $fn$
                BEGIN
                    PERFORM 1 FROM accounts WHERE handle = owner FOR UPDATE;
                    IF NOT EXISTS (SELECT 1 FROM credentials WHERE id = cid AND user_handle = owner) THEN
                        RETURN 0;
                    END IF;
                    IF (SELECT COUNT(*) FROM credentials WHERE user_handle = owner) < 2
                        AND NOT EXISTS (SELECT 1 FROM identities WHERE user_handle = owner) THEN
                        RETURN -1;
                    END IF;
                    DELETE FROM credentials WHERE id = cid AND user_handle = owner;
                    RETURN 1;
                END
                $fn$
                """
            ]
        ),
        // Room for one more credential: the account's row locked, then its credentials counted with
        // a snapshot taken after the lock, so that concurrent registrations to one account, from any
        // processes, cannot together pass the limit. (One statement alone counts with the snapshot
        // it started with, before the lock was had.) The lock is held to the end of the caller's
        // statement's transaction.
        (
            8,
            [
                """
                CREATE FUNCTION webauthn_credential_room(owner BYTEA, most INTEGER) RETURNS BOOLEAN LANGUAGE plpgsql AS $fn$
                BEGIN
                    PERFORM 1 FROM accounts WHERE handle = owner FOR UPDATE;
                    RETURN (SELECT COUNT(*) FROM credentials WHERE user_handle = owner) < most;
                END
                $fn$
                """
            ]
        ),
        // An identity unlinked under a share lock on its account's row, which a deletion of the
        // account's last credential (version 7) takes for update: the two cannot each count the
        // other as the way in that remains (an Apple consent revoked while the last passkey is
        // deleted). The identity is deleted whether or not its account exists.
        (
            9,
            [
                """
                CREATE FUNCTION webauthn_unlink(p TEXT, s TEXT) RETURNS SETOF identities LANGUAGE plpgsql AS $fn$
                BEGIN
                    PERFORM 1 FROM accounts WHERE handle = (SELECT user_handle FROM identities WHERE provider = p AND subject = s) FOR SHARE;
                    RETURN QUERY DELETE FROM identities WHERE provider = p AND subject = s RETURNING *;
                END
                $fn$
                """
            ]
        ),
        // A session that ends (signed out, signed out everywhere, rotated at a sign-in, expired,
        // beyond the per-account cap, its account deleted) takes the ceremonies pending under its
        // binding with it: an addition started before a sign-out could be finished after it with
        // the old cookie, and signed in (red team, fifth pass). A row trigger fires at the end of
        // its statement, after a ceremony that statement consumed is gone.
        (
            10,
            [
                """
                CREATE FUNCTION webauthn_session_ended() RETURNS trigger LANGUAGE plpgsql AS $fn$
                BEGIN
                    DELETE FROM challenges WHERE binding = OLD.id_hash;
                    RETURN NULL;
                END
                $fn$
                """,
                "CREATE TRIGGER sessions_delete AFTER DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION webauthn_session_ended()",
            ]
        ),
        // Look-alike keys computed again: the table of look-alikes grew (Lisu, Cherokee). Every key
        // is first made unique and unlike any name's key (names have no spaces), so that no key computed again can
        // meet an old one; a key two accounts share is suffixed (with a space) for the later one.
        (
            11,
            ["UPDATE accounts SET name_key = 'migrating ' || encode(handle, 'hex')"]
        ),
        // An account's sessions ended under its row's lock, then deleted with a snapshot taken after
        // it; an addition's commit takes the same lock before it consumes its ceremony. A commit in
        // flight is waited for and its new session ended with the others; a commit that comes after
        // finds its ceremony gone with the session that started it. Both take the account's lock
        // first, so neither holds a row the other waits for (red team, sixth pass).
        (
            12,
            [
                """
                CREATE OR REPLACE FUNCTION webauthn_lock_account(owner BYTEA) RETURNS BOOLEAN LANGUAGE plpgsql AS $fn$
                BEGIN
                    PERFORM 1 FROM accounts WHERE handle = owner FOR UPDATE;
                    RETURN TRUE;
                END
                $fn$
                """,
                """
                CREATE OR REPLACE FUNCTION webauthn_end_sessions(owner BYTEA, kept BYTEA) RETURNS INTEGER LANGUAGE plpgsql AS $fn$
                DECLARE ended INTEGER;
                BEGIN
                    PERFORM 1 FROM accounts WHERE handle = owner FOR UPDATE;
                    DELETE FROM sessions WHERE user_handle = owner AND (kept IS NULL OR id_hash <> kept);
                    GET DIAGNOSTICS ended = ROW_COUNT;
                    RETURN ended;
                END
                $fn$
                """,
            ]
        ),
        // Again: the keys are UTS #39 skeletons (`UserName+Skeleton.swift`, red team, eighth pass);
        // and a second unique key, the name's in capitals (`UserName.capitalsKey`), so that names
        // whose capitals look unlike their small letters (`Борис`, `борис`) are one account.
        (
            13,
            [
                "UPDATE accounts SET name_key = 'migrating ' || encode(handle, 'hex')",
                "ALTER TABLE accounts ADD COLUMN capitals_key TEXT",
                "CREATE UNIQUE INDEX accounts_by_capitals_key ON accounts (capitals_key)",
            ]
        ),
        // The owner unlinking one of the account's identities, unless it is the last way in: the
        // account's row locked as a credential's deletion locks it, then counted with a snapshot
        // taken after the lock, so that the two racing cannot leave the account with neither (red
        // team, thirteenth pass: an intruder's linked Apple ID could not be removed). Answers the
        // outcome (1 unlinked, -1 the last way in, 0 no such identity of the account) and the
        // unlinked identity's refresh token, to revoke.
        (
            14,
            [
                """
                CREATE OR REPLACE FUNCTION webauthn_unlink_guarded(p TEXT, s TEXT, owner BYTEA) RETURNS TABLE (outcome INTEGER, token BYTEA)
                LANGUAGE plpgsql AS $fn$
                DECLARE removed BYTEA;
                BEGIN
                    PERFORM 1 FROM accounts WHERE handle = owner FOR UPDATE;
                    IF NOT EXISTS (SELECT 1 FROM identities i WHERE i.provider = p AND i.subject = s AND i.user_handle = owner) THEN
                        RETURN QUERY SELECT 0, NULL::bytea;
                        RETURN;
                    END IF;
                    IF NOT EXISTS (SELECT 1 FROM credentials c WHERE c.user_handle = owner)
                        AND (SELECT COUNT(*) FROM identities i WHERE i.user_handle = owner) < 2 THEN
                        RETURN QUERY SELECT -1, NULL::bytea;
                        RETURN;
                    END IF;
                    DELETE FROM identities i WHERE i.provider = p AND i.subject = s AND i.user_handle = owner RETURNING i.refresh_token INTO removed;
                    RETURN QUERY SELECT 1, removed;
                END
                $fn$
                """
            ]
        ),
        // Whether the provider delivers mail to the identity's email (Apple's email-disabled and
        // email-enabled), and when the last such change was dated, so that one delivered late
        // changes nothing.
        (15, ["ALTER TABLE identities ADD COLUMN email_enabled BOOLEAN, ADD COLUMN email_changed_at DOUBLE PRECISION"]),
    ]

    /// The first migration whose accounts have a capitals key.
    static let capitalsKeyVersion = 13

    /// Work a migration needs beyond SQL, in its transaction: look-alike keys
    /// for accounts made before version 2, and again at versions 11 and 13 (a duplicate key is
    /// suffixed, so the migration never fails on old data).
    static func afterStatements(of version: Int, _ c: PostgresConnection) throws {
        guard [2, 11, 13].contains(version) else { return }
        // Capitals keys from their first migration on: cleared first, like the look-alike keys.
        let capitals = version >= capitalsKeyVersion
        if capitals { _ = try c.execute("UPDATE accounts SET capitals_key = NULL", retry: .never) }
        var seen: Set<String> = [], seenCapitals: Set<String> = []
        for row in try c.execute("SELECT name, encode(handle, 'hex') AS h FROM accounts ORDER BY name", retry: .never) {
            guard let name = row["name"], let handle = row["h"] else { continue }
            var key = UserName.lookalikeKey(name)
            if !seen.insert(key).inserted { key += " legacy " + handle }
            _ = try c.execute("UPDATE accounts SET name_key = $1 WHERE name = $2", [key, name], retry: .never)
            guard capitals else { continue }
            var capitalsKey = UserName.capitalsKey(name)
            if !seenCapitals.insert(capitalsKey).inserted { capitalsKey += " legacy " + handle }
            _ = try c.execute("UPDATE accounts SET capitals_key = $1 WHERE name = $2", [capitalsKey, name], retry: .never)
        }
    }

    /// Throws `storage_failure` unless the search path holds this store's tables, each an
    /// ordinary table with this store's columns, all in one schema, at the latest version with no
    /// version missing; reads only. (Red team, eighteenth pass: names alone let views, tables split
    /// across schemas, and NULL or text versions through, and an audit then wrote a flag through a
    /// view into another application's table.)
    ///
    /// Each must also be a table on its own: no rule, no child table or partition, no trigger but
    /// this store's own. Writes through any of them reached other tables, schemas or servers
    /// (re-check of the eighteenth pass: an inheriting child, a partition in another schema or
    /// on a foreign server, a `DO ALSO` rule, a trigger).
    static func requireCurrent(_ pool: PostgresPool) async throws {
        let latest = migrations.last?.version ?? 0
        var schemas: Set<String> = []
        for table in [("schema_version", ["version"])] + StoreSchema.tables {
            let rows = try await pool.query(
                """
                SELECT c.relkind::text AS kind, c.relnamespace::text AS schema, a.attname::text AS name, format_type(a.atttypid, NULL) AS type,
                    (c.relhasrules OR EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid)
                        OR EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal AND t.tgname <> ALL ($2::text[]))) AS attached
                FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped WHERE c.oid = to_regclass($1)
                """, [table.0, "{\(ownTriggers.joined(separator: ","))}"], retry: .idempotent)
            let columns = Dictionary(rows.compactMap { row in row["name"].map { ($0, row["type"] ?? "") } }, uniquingKeysWith: { a, _ in a })
            guard rows.first?["kind"] == "r", rows.first?["attached"] == "f", table.1.allSatisfy({ columns[$0] != nil }),
                table.0 != "schema_version" || columns["version"] == "integer"
            else {
                throw WebAuthnError(
                    .storageFailure, "the database is not this server's (no table \(table.0) with its columns); run webauthn serve with it first")
            }
            schemas.insert(rows.first?["schema"] ?? "")
        }
        guard schemas.count == 1 else {
            throw WebAuthnError(.storageFailure, "this server's tables are found in more than one schema of the search path; give one schema")
        }
        let found = try await pool.query("SELECT COUNT(*) FILTER (WHERE version IS NULL) AS missing, MAX(version) AS v FROM schema_version", retry: .idempotent)
            .first
        guard found?["missing"] == "0" else { throw WebAuthnError(.storageFailure, "the database's schema_version has a row without a version") }
        guard let version = found?["v"].flatMap({ Int($0) }), version == latest else { throw StoreSchema.otherVersion(found?["v"] ?? "none", latest: latest) }
    }

    /// The triggers the migrations create.
    static let ownTriggers = ["sessions_delete"]

    static func migrate(_ pool: PostgresPool) async throws {
        try await pool.run { c in
            _ = try c.execute("BEGIN")
            // Within the transaction a broken connection is an error: nothing is sent again.
            do {
                // Migrations wait for each other's lock and may build indexes on large tables: no statement timeout.
                _ = try c.execute("SET LOCAL statement_timeout = 0", retry: .never)
                _ = try c.execute("SELECT pg_advisory_xact_lock(\(lockKey))", retry: .never)
                _ = try c.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)", retry: .never)
                let current = Int(try c.execute("SELECT COALESCE(MAX(version), 0) AS v FROM schema_version", retry: .never).first?["v"] ?? "0") ?? 0
                // A build older than the schema does not know what the newer one keeps (its
                // constraints, its functions): it refuses rather than run on it.
                let latest = migrations.last?.version ?? 0
                guard current <= latest else { throw StoreSchema.newerThanBuild(current, latest: latest) }
                for migration in migrations where migration.version > current {
                    for statement in migration.statements { _ = try c.execute(statement, retry: .never) }
                    try afterStatements(of: migration.version, c)
                    _ = try c.execute("INSERT INTO schema_version (version) VALUES ($1)", [String(migration.version)], retry: .never)
                }
                _ = try c.execute("COMMIT", retry: .never)
            } catch {
                _ = try? c.execute("ROLLBACK", retry: .never)
                throw error
            }
        }
    }
}
