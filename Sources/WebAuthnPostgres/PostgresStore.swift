import Foundation
import WebAuthnCore

/// The store for several server instances behind a load balancer: the same
/// contract as `SQLiteStore`, on PostgreSQL through libpq. Every state change
/// is one atomic statement (`INSERT` on the primary key, `DELETE … RETURNING`,
/// `UPDATE … WHERE sign_count = $n RETURNING`), so the guarantees hold across
/// instances; migrations run under an advisory lock, once.
public final class PostgresStore: CredentialStore, ChallengeStore, AccountStore {
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
                 r.transports.joined(separator: ","), PGText.bool(r.uvInitialized), PGText.bool(r.backupEligible), PGText.bool(r.backupState),
                 PGText.bytea(r.aaguid.bytes), r.attestationFormat, PGText.double(r.createdAt.timeIntervalSince1970),
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
            signCount: UInt32(row["sign_count"] ?? "0") ?? 0, transports: transports.isEmpty ? [] : transports.split(separator: ",").map(String.init),
            uvInitialized: row["uv_initialized"] == "t", backupEligible: row["backup_eligible"] == "t", backupState: row["backup_state"] == "t",
            aaguid: AAGUID(bytes: try bytes("aaguid")) ?? .zero, attestationFormat: row["attestation_format"] ?? "none",
            createdAt: Date(timeIntervalSince1970: Double(row["created_at"] ?? "0") ?? 0),
            lastUsedAt: row["last_used_at"].flatMap(Double.init).map { Date(timeIntervalSince1970: $0) })
    }

    // MARK: ChallengeStore

    public func insert(_ ceremony: PendingCeremony) async throws {
        let now = Date().timeIntervalSince1970
        _ = try await pool.query("DELETE FROM challenges WHERE expires_at < $1", [PGText.double(now - 3600)])
        _ = try await pool.query(
            "INSERT INTO challenges (challenge, ceremony, expires_at) VALUES ($1, $2, $3) ON CONFLICT (challenge) DO UPDATE SET ceremony = EXCLUDED.ceremony, expires_at = EXCLUDED.expires_at",
            [PGText.bytea(ceremony.challenge), ceremony.json.serialized(), PGText.double(ceremony.expiresAt.timeIntervalSince1970)])
    }

    public func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await pool.query("SELECT ceremony FROM challenges WHERE challenge = $1", [PGText.bytea(challenge)]).first.map(Self.ceremony)
    }

    public func consume(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await pool.query("DELETE FROM challenges WHERE challenge = $1 RETURNING ceremony", [PGText.bytea(challenge)]).first.map(Self.ceremony)
    }

    static func ceremony(_ row: PostgresConnection.Row) throws -> PendingCeremony {
        guard let text = row["ceremony"] else { throw WebAuthnError(.storageFailure, "challenges.ceremony is NULL") }
        return try PendingCeremony(json: JSONValue.parse(text))
    }

    // MARK: AccountStore

    public func account(named name: String) async throws -> UserEntity? {
        try await pool.query("SELECT name, handle, display_name FROM accounts WHERE name = $1", [name]).first.map(Self.account)
    }

    public func account(handle: [UInt8]) async throws -> UserEntity? {
        try await pool.query("SELECT name, handle, display_name FROM accounts WHERE handle = $1", [PGText.bytea(handle)]).first.map(Self.account)
    }

    public func account(named name: String, creating candidate: UserEntity) async throws -> UserEntity {
        _ = try await pool.query("INSERT INTO accounts (name, handle, display_name) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
                                 [name, PGText.bytea(candidate.id), candidate.displayName])
        guard let account = try await account(named: name) else { throw WebAuthnError(.storageFailure, "account \(name) vanished") }
        return account
    }

    static func account(_ row: PostgresConnection.Row) throws -> UserEntity {
        guard let name = row["name"], let handle = PGText.bytes(row["handle"]) else { throw WebAuthnError(.storageFailure, "accounts row is unreadable") }
        return try UserEntity(id: handle, name: name, displayName: row["display_name"])
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
    ]

    static func migrate(_ pool: PostgresPool) async throws {
        try await pool.run { c in
            _ = try c.execute("BEGIN")
            do {
                _ = try c.execute("SELECT pg_advisory_xact_lock(\(lockKey))")
                _ = try c.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                let current = Int(try c.execute("SELECT COALESCE(MAX(version), 0) AS v FROM schema_version").first?["v"] ?? "0") ?? 0
                for migration in migrations where migration.version > current {
                    for statement in migration.statements { _ = try c.execute(statement) }
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
