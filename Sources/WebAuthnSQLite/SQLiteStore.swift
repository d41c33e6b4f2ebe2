import Foundation
import Logging
import SQLiteNIO
import WebAuthnCore

/// The embedded default store: credentials, pending ceremonies and accounts
/// in one SQLite file (WAL, synchronous FULL: an acknowledged write survives
/// a crash). Every state change is one atomic statement: `INSERT` on the
/// primary key (a duplicate fails), `DELETE … RETURNING` to consume a
/// challenge exactly once, `UPDATE … WHERE sign_count = ? RETURNING` for the
/// counter compare-and-set. Several processes may share the file.
public final class SQLiteStore: CredentialStore, ChallengeStore, AccountStore {
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
                [.blob(r.id), .blob(r.userHandle), .blob(r.publicKey.bytes), .integer(Int(r.signCount)), .text(r.transports.joined(separator: ",")),
                 .integer(r.uvInitialized ? 1 : 0), .integer(r.backupEligible ? 1 : 0), .integer(r.backupState ? 1 : 0), .blob(r.aaguid.bytes),
                 .text(r.attestationFormat), .float(r.createdAt.timeIntervalSince1970), r.lastUsedAt.map { .float($0.timeIntervalSince1970) } ?? .null])
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
            signCount: UInt32(clamping: int("sign_count")), transports: transports.isEmpty ? [] : transports.split(separator: ",").map(String.init),
            uvInitialized: int("uv_initialized") != 0, backupEligible: int("backup_eligible") != 0, backupState: int("backup_state") != 0,
            aaguid: AAGUID(bytes: try blob("aaguid")) ?? .zero, attestationFormat: row.column("attestation_format")?.string ?? "none",
            createdAt: Date(timeIntervalSince1970: row.column("created_at")?.double ?? 0),
            lastUsedAt: row.column("last_used_at")?.double.map { Date(timeIntervalSince1970: $0) })
    }

    // MARK: ChallengeStore

    public func insert(_ ceremony: PendingCeremony) async throws {
        // Expired ceremonies are swept on the way, so the table stays bounded.
        _ = try await connection.query("DELETE FROM challenges WHERE expires_at < ?", [.float(Date().timeIntervalSince1970 - 3600)])
        _ = try await connection.query("INSERT OR REPLACE INTO challenges (challenge, ceremony, expires_at) VALUES (?, ?, ?)",
                                        [.blob(ceremony.challenge), .text(ceremony.json.serialized()), .float(ceremony.expiresAt.timeIntervalSince1970)])
    }

    public func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await connection.query("SELECT ceremony FROM challenges WHERE challenge = ?", [.blob(challenge)]).first.map(Self.ceremony)
    }

    public func consume(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await connection.query("DELETE FROM challenges WHERE challenge = ? RETURNING ceremony", [.blob(challenge)]).first.map(Self.ceremony)
    }

    static func ceremony(_ row: SQLiteRow) throws -> PendingCeremony {
        guard let text = row.column("ceremony")?.string else { throw WebAuthnError(.storageFailure, "challenges.ceremony is not text") }
        return try PendingCeremony(json: JSONValue.parse(text))
    }

    // MARK: AccountStore

    public func account(named name: String) async throws -> UserEntity? {
        try await connection.query("SELECT name, handle, display_name FROM accounts WHERE name = ?", [.text(name)]).first.map(Self.account)
    }

    public func account(handle: [UInt8]) async throws -> UserEntity? {
        try await connection.query("SELECT name, handle, display_name FROM accounts WHERE handle = ?", [.blob(handle)]).first.map(Self.account)
    }

    public func account(named name: String, creating candidate: UserEntity) async throws -> UserEntity {
        _ = try await connection.query("INSERT OR IGNORE INTO accounts (name, handle, display_name) VALUES (?, ?, ?)",
                                        [.text(name), .blob(candidate.id), .text(candidate.displayName)])
        guard let account = try await account(named: name) else { throw WebAuthnError(.storageFailure, "account \(name) vanished") }
        return account
    }

    static func account(_ row: SQLiteRow) throws -> UserEntity {
        guard let name = row.column("name")?.string, let handle = row.column("handle")?.blob else {
            throw WebAuthnError(.storageFailure, "accounts row is unreadable")
        }
        return try UserEntity(id: Array(handle.readableBytesView), name: name, displayName: row.column("display_name")?.string)
    }
}

extension SQLiteData {
    static func blob(_ bytes: [UInt8]) -> SQLiteData { .blob(ByteBuffer(bytes: bytes)) }
}
