public import Foundation
public import Logging
public import SQLiteNIO
public import WebAuthnCore
package import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The embedded default store: credentials, pending ceremonies, accounts and
/// signed-in sessions in one SQLite file (WAL, synchronous FULL: an acknowledged write survives
/// a crash). Every state change is one atomic statement: `INSERT` on the
/// primary key (a duplicate fails), `DELETE … RETURNING` to consume a
/// challenge exactly once, `UPDATE … WHERE sign_count = ? RETURNING` for the
/// counter compare-and-set. Several processes may share the file.
public final class SQLiteStore: CredentialStore, ChallengeStore, AccountStore, SessionStore {
    let connection: SQLiteConnection
    public let path: String

    /// Opens (creating if needed) and migrates the database at `path`.
    public static func open(path: String, logger: Logger = Logger(label: "webauthn.sqlite")) async throws -> SQLiteStore {
        let connection = try await SQLiteConnection.open(storage: path == ":memory:" ? .memory : .file(path: path), logger: logger)
        let store = SQLiteStore(connection: connection, path: path)
        for pragma in ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"] {
            _ = try await connection.query(pragma)
        }
        try await SQLiteMigrations.migrate(connection)
        return store
    }

    init(connection: SQLiteConnection, path: String) {
        self.connection = connection
        self.path = path
    }

    public func close() async throws { try await connection.close() }

    // MARK: CredentialStore

    static let credentialColumns = "id, user_handle, public_key, sign_count, transports, uv_initialized, backup_eligible, backup_state, aaguid, attestation_format, created_at, last_used_at"

    public func credential(id: [UInt8]) async throws -> CredentialRecord? {
        try await connection.query("SELECT \(Self.credentialColumns) FROM credentials WHERE id = ?", [.blob(id)]).first.map(Self.record)
    }

    public func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord] {
        try await connection.query("SELECT \(Self.credentialColumns) FROM credentials WHERE user_handle = ? ORDER BY created_at", [.blob(userHandle)]).map(Self.record)
    }

    public func insert(_ r: CredentialRecord) async throws {
        do {
            _ = try await connection.query(
                "INSERT INTO credentials (\(Self.credentialColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [.blob(r.id), .blob(r.userHandle), .blob(r.publicKey.bytes), .integer(Int(r.signCount)), .text(r.transports.map(\.rawValue).joined(separator: ",")),
                 .integer(r.uvInitialized ? 1 : 0), .integer(r.backupEligible ? 1 : 0), .integer(r.backupState ? 1 : 0), .blob(r.aaguid.bytes),
                 .text(r.attestationFormat.rawValue), .float(r.createdAt.timeIntervalSince1970), r.lastUsedAt.map { .float($0.timeIntervalSince1970) } ?? .null])
        } catch let error as SQLiteError where error.message.contains("constraint") {
            throw WebAuthnError(.credentialAlreadyRegistered, "credential \(Base64URL.encode(r.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
        }
    }

    public func update(_ r: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool {
        let rows = try await connection.query(
            "UPDATE credentials SET sign_count = ?, backup_state = ?, uv_initialized = ?, last_used_at = ? WHERE id = ? AND sign_count = ? RETURNING id",
            [.integer(Int(r.signCount)), .integer(r.backupState ? 1 : 0), .integer(r.uvInitialized ? 1 : 0),
             r.lastUsedAt.map { .float($0.timeIntervalSince1970) } ?? .null, .blob(r.id), .integer(Int(expectedSignCount))])
        return !rows.isEmpty
    }

    public func delete(id: [UInt8]) async throws -> Bool {
        !(try await connection.query("DELETE FROM credentials WHERE id = ? RETURNING id", [.blob(id)])).isEmpty
    }

    /// Credential keys already imported, shared by every store of the process.
    static let keys = COSEKeyCache()

    static func record(_ row: SQLiteRow) throws -> CredentialRecord {
        func blob(_ name: String) throws -> [UInt8] {
            guard let buffer = row.column(name)?.blob else { throw WebAuthnError(.storageFailure, "credentials.\(name) is not a blob") }
            return Array(buffer.readableBytesView)
        }
        func int(_ name: String) -> Int { Int(row.column(name)?.integer ?? 0) }
        let transports = row.column("transports")?.string ?? ""
        return CredentialRecord(
            id: try blob("id"), userHandle: try blob("user_handle"), publicKey: try keys.key(try blob("public_key")),
            signCount: UInt32(clamping: int("sign_count")), transports: transports.isEmpty ? [] : transports.split(separator: ",").map { AuthenticatorTransport(rawValue: String($0)) },
            uvInitialized: int("uv_initialized") != 0, backupEligible: int("backup_eligible") != 0, backupState: int("backup_state") != 0,
            aaguid: AAGUID(bytes: try blob("aaguid")) ?? .zero, attestationFormat: AttestationFormat(rawValue: row.column("attestation_format")?.string ?? "none"),
            createdAt: Date(timeIntervalSince1970: row.column("created_at")?.double ?? 0),
            lastUsedAt: row.column("last_used_at")?.double.map { Date(timeIntervalSince1970: $0) })
    }

    // MARK: ChallengeStore

    public func insert(_ ceremony: PendingCeremony) async throws {
        // The challenges_per_binding trigger keeps a binding's newest ceremonies, in the same statement.
        _ = try await connection.query("INSERT OR REPLACE INTO challenges (challenge, ceremony, expires_at, binding) VALUES (?, ?, ?, ?)",
                                        [.blob(ceremony.challenge), .text(ceremony.json.serialized()), .float(ceremony.expiresAt.timeIntervalSince1970),
                                         ceremony.binding.map { .blob($0) } ?? .null])
    }

    public func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await connection.query("SELECT ceremony FROM challenges WHERE challenge = ?", [.blob(challenge)]).first.map(Self.ceremony)
    }

    public func consume(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await connection.query("DELETE FROM challenges WHERE challenge = ? RETURNING ceremony", [.blob(challenge)]).first.map(Self.ceremony)
    }

    public func sweep(expiredBefore date: Date) async throws -> Int {
        _ = try await connection.query("DELETE FROM challenges WHERE expires_at < ?", [.float(date.timeIntervalSince1970)])
        return Int(try await connection.query("SELECT COUNT(*) AS n FROM challenges").first?.column("n")?.integer ?? 0)
    }

    static func ceremony(_ row: SQLiteRow) throws -> PendingCeremony {
        guard let text = row.column("ceremony")?.string else { throw WebAuthnError(.storageFailure, "challenges.ceremony is not text") }
        return try PendingCeremony(json: JSONValue.parse(text))
    }

    // MARK: AccountStore

    public func account(named name: String) async throws -> UserEntity? {
        try await connection.query("SELECT name, handle, display_name FROM accounts WHERE name_key = ?", [.text(UserName.lookalikeKey(name))]).first.map(Self.account)
    }

    public func account(handle: [UInt8]) async throws -> UserEntity? {
        try await connection.query("SELECT name, handle, display_name FROM accounts WHERE handle = ?", [.blob(handle)]).first.map(Self.account)
    }

    public func create(_ user: UserEntity, firstCredential r: CredentialRecord) async throws {
        // One statement: the new_accounts_insert trigger inserts both rows or neither.
        do {
            _ = try await connection.query(
                """
                INSERT INTO new_accounts (name, name_key, handle, display_name, id, public_key, sign_count, transports, uv_initialized,
                                          backup_eligible, backup_state, aaguid, attestation_format, created_at, last_used_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [.text(user.name), .text(UserName.lookalikeKey(user.name)), .blob(user.id), .text(user.displayName),
                 .blob(r.id), .blob(r.publicKey.bytes), .integer(SQLiteInt64(r.signCount)), .text(r.transports.map(\.rawValue).joined(separator: ",")),
                 .integer(r.uvInitialized ? 1 : 0), .integer(r.backupEligible ? 1 : 0), .integer(r.backupState ? 1 : 0), .blob(r.aaguid.bytes),
                 .text(r.attestationFormat.rawValue), .float(r.createdAt.timeIntervalSince1970), r.lastUsedAt.map { .float($0.timeIntervalSince1970) } ?? .null])
        } catch let error as SQLiteError where error.message.contains("constraint") {
            if error.message.contains("credentials.") {
                throw WebAuthnError(.credentialAlreadyRegistered, "credential \(Base64URL.encode(r.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
            }
            throw WebAuthnError(.usernameUnavailable, "an account named \(user.name.prefix(64)) (or a name that looks the same) exists")
        }
    }

    static func account(_ row: SQLiteRow) throws -> UserEntity {
        guard let name = row.column("name")?.string, let handle = row.column("handle")?.blob else {
            throw WebAuthnError(.storageFailure, "accounts row is unreadable")
        }
        return try UserEntity(id: Array(handle.readableBytesView), name: name, displayName: row.column("display_name")?.string)
    }

    // MARK: Settings

    /// The server secret kept in the database: made once (32 random bytes) by
    /// the first process that asks, then the same for every process and
    /// restart that opens this database. For servers given no secret of their own.
    public func serverSecret() async throws -> [UInt8] {
        _ = try await connection.query("INSERT OR IGNORE INTO settings (name, value) VALUES ('server_secret', ?)", [.blob(SecureRandom.bytes(32))])
        guard let value = try await connection.query("SELECT value FROM settings WHERE name = 'server_secret'").first?.column("value")?.blob,
              value.readableBytes >= 32 else { throw WebAuthnError(.storageFailure, "settings.server_secret is unreadable") }
        return Array(value.readableBytesView)
    }

    // MARK: SessionStore

    public func insert(_ session: SignedInSession) async throws {
        // The sessions_per_user trigger keeps the account's newest sessions, in the same statement.
        _ = try await connection.query(
            "INSERT OR REPLACE INTO sessions (id_hash, user_handle, created_at, authenticated_at, expires_at) VALUES (?, ?, ?, ?, ?)",
            [.blob(session.idHash), .blob(session.userHandle), .float(session.createdAt.timeIntervalSince1970),
             .float(session.authenticatedAt.timeIntervalSince1970), .float(session.expiresAt.timeIntervalSince1970)])
    }

    public func session(idHash: [UInt8]) async throws -> SignedInSession? {
        guard let row = try await connection.query(
            "SELECT id_hash, user_handle, created_at, authenticated_at, expires_at FROM sessions WHERE id_hash = ?", [.blob(idHash)]).first else { return nil }
        guard let handle = row.column("user_handle")?.blob, let created = row.column("created_at")?.double,
              let authenticated = row.column("authenticated_at")?.double, let expires = row.column("expires_at")?.double else {
            throw WebAuthnError(.storageFailure, "sessions row is unreadable")
        }
        return SignedInSession(idHash: idHash, userHandle: Array(handle.readableBytesView), createdAt: Date(timeIntervalSince1970: created),
                               authenticatedAt: Date(timeIntervalSince1970: authenticated), expiresAt: Date(timeIntervalSince1970: expires))
    }

    public func delete(idHash: [UInt8]) async throws {
        _ = try await connection.query("DELETE FROM sessions WHERE id_hash = ?", [.blob(idHash)])
    }

    public func sweepSessions(expiredBefore date: Date) async throws -> Int {
        _ = try await connection.query("DELETE FROM sessions WHERE expires_at < ?", [.float(date.timeIntervalSince1970)])
        return Int(try await connection.query("SELECT COUNT(*) AS n FROM sessions").first?.column("n")?.integer ?? 0)
    }
}

extension SQLiteData {
    static func blob(_ bytes: [UInt8]) -> SQLiteData { .blob(ByteBuffer(bytes: bytes)) }
}
