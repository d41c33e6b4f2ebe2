public import Foundation
public import WebAuthnCore
package import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The store for several server instances behind a load balancer: the same
/// contract as `SQLiteStore`, on PostgreSQL through libpq. Every state change
/// is one atomic statement (`INSERT` on the primary key, `DELETE … RETURNING`,
/// `UPDATE … WHERE sign_count = $n RETURNING`), so the guarantees hold across
/// instances; migrations run under an advisory lock, once.
public final class PostgresStore: CredentialStore, ChallengeStore, AccountStore, SessionStore {
    let pool: PostgresPool

    /// Connects with a libpq URL (`postgres://user@host:port/db`) and migrates.
    public static func open(url: String, connections: Int = 4) async throws -> PostgresStore {
        let store = PostgresStore(pool: try PostgresPool(url: url, size: connections))
        try await PostgresMigrations.migrate(store.pool)
        return store
    }

    init(pool: PostgresPool) { self.pool = pool }

    static let columns = "id, user_handle, public_key, sign_count, transports, uv_initialized, backup_eligible, backup_state, aaguid, attestation_format, created_at, last_used_at"

    // MARK: CredentialStore

    public func credential(id: [UInt8]) async throws -> CredentialRecord? {
        try await pool.query("SELECT \(Self.columns) FROM credentials WHERE id = $1", [PGText.bytea(id)]).first.map(Self.record)
    }

    public func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord] {
        try await pool.query("SELECT \(Self.columns) FROM credentials WHERE user_handle = $1 ORDER BY created_at", [PGText.bytea(userHandle)]).map(Self.record)
    }

    public func insert(_ r: CredentialRecord) async throws {
        do {
            _ = try await pool.query(
                "INSERT INTO credentials (\(Self.columns)) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                [PGText.bytea(r.id), PGText.bytea(r.userHandle), PGText.bytea(r.publicKey.bytes), String(r.signCount),
                 r.transports.map(\.rawValue).joined(separator: ","), PGText.bool(r.uvInitialized), PGText.bool(r.backupEligible), PGText.bool(r.backupState),
                 PGText.bytea(r.aaguid.bytes), r.attestationFormat.rawValue, PGText.double(r.createdAt.timeIntervalSince1970),
                 r.lastUsedAt.map { PGText.double($0.timeIntervalSince1970) }])
        } catch let error as PostgresConnection.Failure where error.sqlState == "23505" {
            throw WebAuthnError(.credentialAlreadyRegistered, "credential \(Base64URL.encode(r.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
        }
    }

    public func update(_ r: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool {
        !(try await pool.query(
            "UPDATE credentials SET sign_count = $1, backup_state = $2, uv_initialized = $3, last_used_at = $4 WHERE id = $5 AND sign_count = $6 RETURNING id",
            [String(r.signCount), PGText.bool(r.backupState), PGText.bool(r.uvInitialized), r.lastUsedAt.map { PGText.double($0.timeIntervalSince1970) },
             PGText.bytea(r.id), String(expectedSignCount)])).isEmpty
    }

    public func delete(id: [UInt8]) async throws -> Bool {
        !(try await pool.query("DELETE FROM credentials WHERE id = $1 RETURNING id", [PGText.bytea(id)])).isEmpty
    }

    /// Credential keys already imported, shared by every store of the process.
    static let keys = COSEKeyCache()

    static func record(_ row: PostgresConnection.Row) throws -> CredentialRecord {
        func bytes(_ name: String) throws -> [UInt8] {
            guard let b = PGText.bytes(row[name]) else { throw WebAuthnError(.storageFailure, "credentials.\(name) is unreadable") }
            return b
        }
        let transports = row["transports"] ?? ""
        return CredentialRecord(
            id: try bytes("id"), userHandle: try bytes("user_handle"), publicKey: try keys.key(try bytes("public_key")),
            signCount: UInt32(row["sign_count"] ?? "0") ?? 0, transports: transports.isEmpty ? [] : transports.split(separator: ",").map { AuthenticatorTransport(rawValue: String($0)) },
            uvInitialized: row["uv_initialized"] == "t", backupEligible: row["backup_eligible"] == "t", backupState: row["backup_state"] == "t",
            aaguid: AAGUID(bytes: try bytes("aaguid")) ?? .zero, attestationFormat: AttestationFormat(rawValue: row["attestation_format"] ?? "none"),
            createdAt: Date(timeIntervalSince1970: Double(row["created_at"] ?? "0") ?? 0),
            lastUsedAt: row["last_used_at"].flatMap(Double.init).map { Date(timeIntervalSince1970: $0) })
    }

    // MARK: ChallengeStore

    public func insert(_ ceremony: PendingCeremony) async throws {
        let values: [String?] = [PGText.bytea(ceremony.challenge), ceremony.json.serialized(), PGText.double(ceremony.expiresAt.timeIntervalSince1970),
                                 ceremony.binding.map(PGText.bytea)]
        guard ceremony.binding != nil else {
            _ = try await pool.query(
                "INSERT INTO challenges (challenge, ceremony, expires_at, binding) VALUES ($1, $2, $3, $4) ON CONFLICT (challenge) DO UPDATE SET ceremony = EXCLUDED.ceremony, expires_at = EXCLUDED.expires_at",
                values)
            return
        }
        // One statement: the insert, and the binding's oldest ceremonies beyond the limit dropped
        // (the DELETE sees the table before the INSERT, so it keeps one fewer).
        _ = try await pool.query(
            """
            WITH inserted AS (
                INSERT INTO challenges (challenge, ceremony, expires_at, binding) VALUES ($1, $2, $3, $4)
                ON CONFLICT (challenge) DO UPDATE SET ceremony = EXCLUDED.ceremony, expires_at = EXCLUDED.expires_at RETURNING challenge
            )
            DELETE FROM challenges WHERE binding = $4 AND challenge NOT IN (SELECT challenge FROM inserted) AND challenge NOT IN (
                SELECT challenge FROM challenges WHERE binding = $4 ORDER BY expires_at DESC LIMIT \(PendingCeremony.maxPerBinding - 1))
            """, values)
    }

    public func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await pool.query("SELECT ceremony FROM challenges WHERE challenge = $1", [PGText.bytea(challenge)]).first.map(Self.ceremony)
    }

    public func consume(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await pool.query("DELETE FROM challenges WHERE challenge = $1 RETURNING ceremony", [PGText.bytea(challenge)]).first.map(Self.ceremony)
    }

    public func sweep(expiredBefore date: Date) async throws -> Int {
        _ = try await pool.query("DELETE FROM challenges WHERE expires_at < $1", [PGText.double(date.timeIntervalSince1970)])
        return Int(try await pool.query("SELECT COUNT(*) AS n FROM challenges").first?["n"] ?? "0") ?? 0
    }

    static func ceremony(_ row: PostgresConnection.Row) throws -> PendingCeremony {
        guard let text = row["ceremony"] else { throw WebAuthnError(.storageFailure, "challenges.ceremony is NULL") }
        return try PendingCeremony(json: JSONValue.parse(text))
    }

    // MARK: AccountStore

    public func account(named name: String) async throws -> UserEntity? {
        try await pool.query("SELECT name, handle, display_name FROM accounts WHERE name_key = $1", [UserName.lookalikeKey(name)]).first.map(Self.account)
    }

    public func account(handle: [UInt8]) async throws -> UserEntity? {
        try await pool.query("SELECT name, handle, display_name FROM accounts WHERE handle = $1", [PGText.bytea(handle)]).first.map(Self.account)
    }

    public func create(_ user: UserEntity, firstCredential r: CredentialRecord) async throws {
        // One statement: both rows or neither.
        do {
            _ = try await pool.query(
                """
                WITH account AS (
                    INSERT INTO accounts (name, name_key, handle, display_name) VALUES ($1, $2, $3, $4) RETURNING handle
                )
                INSERT INTO credentials (\(Self.columns))
                SELECT $5, handle, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 FROM account
                """,
                [user.name, UserName.lookalikeKey(user.name), PGText.bytea(user.id), user.displayName,
                 PGText.bytea(r.id), PGText.bytea(r.publicKey.bytes), String(r.signCount), r.transports.map(\.rawValue).joined(separator: ","),
                 PGText.bool(r.uvInitialized), PGText.bool(r.backupEligible), PGText.bool(r.backupState), PGText.bytea(r.aaguid.bytes),
                 r.attestationFormat.rawValue, PGText.double(r.createdAt.timeIntervalSince1970), r.lastUsedAt.map { PGText.double($0.timeIntervalSince1970) }])
        } catch let error as PostgresConnection.Failure where error.sqlState == "23505" {
            if error.message.contains("credentials_pkey") {
                throw WebAuthnError(.credentialAlreadyRegistered, "credential \(Base64URL.encode(r.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
            }
            throw WebAuthnError(.usernameUnavailable, "an account named \(user.name.prefix(64)) (or a name that looks the same) exists")
        }
    }

    static func account(_ row: PostgresConnection.Row) throws -> UserEntity {
        guard let name = row["name"], let handle = PGText.bytes(row["handle"]) else { throw WebAuthnError(.storageFailure, "accounts row is unreadable") }
        return try UserEntity(id: handle, name: name, displayName: row["display_name"])
    }

    // MARK: Settings

    /// The server secret kept in the database: made once by the first
    /// instance that asks, then shared by every instance and restart.
    public func serverSecret() async throws -> [UInt8] {
        _ = try await pool.query("INSERT INTO settings (name, value) VALUES ('server_secret', $1) ON CONFLICT (name) DO NOTHING",
                                 [PGText.bytea(SecureRandom.bytes(32))])
        guard let value = PGText.bytes(try await pool.query("SELECT value FROM settings WHERE name = 'server_secret'").first?["value"]),
              value.count >= 32 else { throw WebAuthnError(.storageFailure, "settings.server_secret is unreadable") }
        return value
    }

    // MARK: SessionStore

    public func insert(_ session: SignedInSession) async throws {
        // One statement: the new session, and the account's oldest beyond the limit dropped.
        let u = PGText.bytea(session.userHandle)
        _ = try await pool.query(
            """
            WITH inserted AS (
                INSERT INTO sessions (id_hash, user_handle, created_at, authenticated_at, expires_at) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (id_hash) DO UPDATE SET user_handle = EXCLUDED.user_handle, created_at = EXCLUDED.created_at,
                    authenticated_at = EXCLUDED.authenticated_at, expires_at = EXCLUDED.expires_at RETURNING id_hash
            )
            DELETE FROM sessions WHERE user_handle = $2 AND id_hash NOT IN (SELECT id_hash FROM inserted) AND id_hash NOT IN (
                SELECT id_hash FROM sessions WHERE user_handle = $2 ORDER BY created_at DESC LIMIT \(SignedInSession.maxPerUser - 1))
            """,
            [PGText.bytea(session.idHash), u, PGText.double(session.createdAt.timeIntervalSince1970),
             PGText.double(session.authenticatedAt.timeIntervalSince1970), PGText.double(session.expiresAt.timeIntervalSince1970)])
    }

    public func session(idHash: [UInt8]) async throws -> SignedInSession? {
        guard let row = try await pool.query(
            "SELECT user_handle, created_at, authenticated_at, expires_at FROM sessions WHERE id_hash = $1", [PGText.bytea(idHash)]).first else { return nil }
        guard let handle = PGText.bytes(row["user_handle"]), let created = row["created_at"].flatMap(Double.init),
              let authenticated = row["authenticated_at"].flatMap(Double.init), let expires = row["expires_at"].flatMap(Double.init) else {
            throw WebAuthnError(.storageFailure, "sessions row is unreadable")
        }
        return SignedInSession(idHash: idHash, userHandle: handle, createdAt: Date(timeIntervalSince1970: created),
                               authenticatedAt: Date(timeIntervalSince1970: authenticated), expiresAt: Date(timeIntervalSince1970: expires))
    }

    public func delete(idHash: [UInt8]) async throws {
        _ = try await pool.query("DELETE FROM sessions WHERE id_hash = $1", [PGText.bytea(idHash)])
    }

    public func sweepSessions(expiredBefore date: Date) async throws -> Int {
        _ = try await pool.query("DELETE FROM sessions WHERE expires_at < $1", [PGText.double(date.timeIntervalSince1970)])
        return Int(try await pool.query("SELECT COUNT(*) AS n FROM sessions").first?["n"] ?? "0") ?? 0
    }
}

/// The PostgreSQL schema, versioned in one place; migrations run once, in
/// order, in one transaction under an advisory lock shared by every instance.
enum PostgresMigrations {
    static let lockKey = "727274"  // any constant shared by all instances
    static let migrations: [(version: Int, statements: [String])] = [
        (1, [
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
        ]),
        // Look-alike keys (filled by `afterStatements`), session-bound ceremonies swept by an
        // expiry index, signed-in sessions shared by every instance.
        (2, [
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
        ]),
        // Settings the servers keep with their data, such as a generated server secret.
        (3, [
            "CREATE TABLE settings (name TEXT PRIMARY KEY, value BYTEA NOT NULL)",
        ]),
    ]

    /// Work a migration needs beyond SQL, in its transaction: look-alike keys
    /// for accounts made before version 2 (a duplicate key is suffixed, so the
    /// migration never fails on old data).
    static func afterStatements(of version: Int, _ c: PostgresConnection) throws {
        guard version == 2 else { return }
        var seen: Set<String> = []
        for row in try c.execute("SELECT name, encode(handle, 'hex') AS h FROM accounts ORDER BY name") {
            guard let name = row["name"], let handle = row["h"] else { continue }
            var key = UserName.lookalikeKey(name)
            if !seen.insert(key).inserted { key += "#legacy-" + handle }
            _ = try c.execute("UPDATE accounts SET name_key = $1 WHERE name = $2", [key, name])
        }
    }

    static func migrate(_ pool: PostgresPool) async throws {
        try await pool.run { c in
            _ = try c.execute("BEGIN")
            do {
                _ = try c.execute("SELECT pg_advisory_xact_lock(\(lockKey))")
                _ = try c.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                let current = Int(try c.execute("SELECT COALESCE(MAX(version), 0) AS v FROM schema_version").first?["v"] ?? "0") ?? 0
                for migration in migrations where migration.version > current {
                    for statement in migration.statements { _ = try c.execute(statement) }
                    try afterStatements(of: migration.version, c)
                    _ = try c.execute("INSERT INTO schema_version (version) VALUES ($1)", [String(migration.version)])
                }
                _ = try c.execute("COMMIT")
            } catch {
                _ = try? c.execute("ROLLBACK")
                throw error
            }
        }
    }
}
