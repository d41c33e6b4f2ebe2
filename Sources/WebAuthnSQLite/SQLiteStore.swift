public import Foundation
public import Logging
public import ServiceLifecycle
public import SQLiteNIO
import NIOConcurrencyHelpers
public import WebAuthnCore
package import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The embedded default store: credentials, pending ceremonies, accounts and
/// signed-in sessions in one SQLite file (WAL, synchronous FULL: an acknowledged write survives
/// a crash). Every state change is one atomic statement: `INSERT` on the
/// primary key (a duplicate fails), `DELETE … RETURNING` to consume a
/// challenge exactly once, `UPDATE … WHERE sign_count = ? RETURNING` for the
/// counter compare-and-set. Several processes may share the file.
///
/// Writes are committed in groups (``GroupCommitWriter``): the statements that arrive while
/// the writer is busy share one transaction and one fsync, and none is acknowledged before
/// its group's `COMMIT` returns. Reads use a second connection, which sees committed writes only.
///
/// A `Service`: run in a `ServiceGroup` (before the services that use it,
/// which shut down first), it closes the database on graceful shutdown.
public final class SQLiteStore: CredentialStore, ChallengeStore, SignInCommitting, AccountStore, LinkedIdentityStore, SessionStore, Service {
    /// The connection that writes (and migrates).
    let connection: SQLiteConnection
    /// The connection that reads: in WAL mode it sees every committed write and never an
    /// open group's. The writer's own connection for an in-memory database.
    let reader: SQLiteConnection
    /// Group commit of the writes (nil for an in-memory database, which has no fsync to share).
    let writer: GroupCommitWriter?
    /// The database file's path (`:memory:` for an in-memory database).
    public let path: String
    /// A pthread lock (not `Synchronization.Mutex`): the statements finish on SQLiteNIO's
    /// threads, and ThreadSanitizer must see the lock that orders them.
    private let lifecycle = NIOLockedValueBox(Lifecycle())

    /// Statements running, and the close once asked for.
    private struct Lifecycle {
        var running = 0
        var closing: Task<Void, any Error>?
        /// Waiting for `running` to reach zero.
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    /// Opens (creating if needed) and migrates the database at `path`.
    public static func open(path: String, logger: Logger = Logger(label: "webauthn.sqlite")) async throws -> SQLiteStore {
        let connection = try await SQLiteConnection.open(storage: path == ":memory:" ? .memory : .file(path: path), logger: logger)
        do {
            for pragma in ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"] {
                _ = try await connection.query(pragma)
            }
            try await SQLiteMigrations.migrate(connection)
        } catch {
            try? await connection.close()
            throw error
        }
        guard path != ":memory:" else { return SQLiteStore(connection: connection, reader: connection, grouped: false, path: path) }
        let reader: SQLiteConnection
        do {
            reader = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
            _ = try await reader.query("PRAGMA query_only=ON")
        } catch {
            try? await connection.close()
            throw error
        }
        return SQLiteStore(connection: connection, reader: reader, grouped: true, path: path)
    }

    init(connection: SQLiteConnection, reader: SQLiteConnection, grouped: Bool, path: String) {
        self.connection = connection
        self.reader = reader
        self.writer = grouped ? GroupCommitWriter(connection: connection) : nil
        self.path = path
    }

    /// Closes the database once the statements already running are done;
    /// later calls throw `storage_failure`. Closing again waits for the first close.
    public func close() async throws {
        let closing = lifecycle.withLockedValue { state in
            if let closing = state.closing { return closing }
            let closing = Task {
                await self.idle()
                if self.reader !== self.connection { try? await self.reader.close() }
                try await self.connection.close()
            }
            state.closing = closing
            return closing
        }
        try await closing.value
    }

    /// Waits for graceful shutdown (or cancellation), then closes the store.
    public func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            try await close()
            throw error
        }
        try await close()
    }

    /// One statement, unless the store is closing or closed.
    func query(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteRow] {
        let open = lifecycle.withLockedValue { state in
            guard state.closing == nil else { return false }
            state.running += 1
            return true
        }
        guard open else { throw WebAuthnError(.storageFailure, "the SQLite store is closed") }
        defer { finished() }
        guard let writer else { return try await connection.query(sql, binds) }
        // Reads on the reader; every other statement is a write, committed in a group.
        return sql.hasPrefix("SELECT") ? try await reader.query(sql, binds) : try await writer.write(sql, binds)
    }

    private func finished() {
        let waiting = lifecycle.withLockedValue { state in
            state.running -= 1
            guard state.running == 0 else { return [CheckedContinuation<Void, Never>]() }
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    /// Returns once no statement is running; called after `closing` is set, so none starts.
    private func idle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = lifecycle.withLockedValue { state in
                guard state.running > 0 else { return true }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    // MARK: CredentialStore

    /// The record with this credential ID, if any.
    public func credential(id: [UInt8]) async throws -> CredentialRecord? {
        try await query("SELECT \(CredentialColumn.list) FROM credentials WHERE id = ?", [.blob(id)]).first.map(Self.record)
    }

    /// The user's credentials, oldest first.
    public func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord] {
        try await query("SELECT \(CredentialColumn.list) FROM credentials WHERE user_handle = ? ORDER BY created_at", [.blob(userHandle)])
            .map(Self.record)
    }

    /// Stores a new record in one `INSERT`; throws `credential_already_registered`
    /// when the ID exists.
    public func insert(_ r: CredentialRecord) async throws {
        do {
            _ = try await query(
                "INSERT INTO credentials (\(CredentialColumn.list)) VALUES (\(Self.placeholders(CredentialColumn.allCases.count)))",
                r.values().map(SQLiteData.init))
        } catch let error as SQLiteError where Self.isDuplicate(error) {
            throw WebAuthnError(
                .credentialAlreadyRegistered, "credential \(Base64URL.encode(r.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
        }
    }

    /// Whether an error is a primary key or unique index violation, by SQLite's
    /// extended result code (the connection is opened with extended codes on).
    static func isDuplicate(_ error: SQLiteError) -> Bool {
        switch error.reason {
        case .constraintPrimaryKeyFailed, .constraintUniqueFailed: true
        default: false
        }
    }

    /// `?, ?, …`: `count` parameters.
    static func placeholders(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ", ") }

    /// Compare-and-set: writes the record's counter, backup state, UV-initialized flag
    /// and last use (nothing else) if the stored counter still equals
    /// `expectedSignCount`; returns whether it did.
    public func update(_ r: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool {
        let rows = try await query(
            "UPDATE credentials SET sign_count = ?, backup_state = ?, uv_initialized = ?, last_used_at = ? WHERE id = ? AND sign_count = ? RETURNING id",
            r.values([.signCount, .backupState, .uvInitialized, .lastUsedAt, .id]).map(SQLiteData.init) + [.integer(SQLiteInt64(expectedSignCount))])
        return !rows.isEmpty
    }

    /// Removes a credential; returns whether it existed.
    public func delete(id: [UInt8]) async throws -> Bool {
        !(try await query("DELETE FROM credentials WHERE id = ? RETURNING id", [.blob(id)])).isEmpty
    }

    /// A sign-in's writes in one statement (the `sign_in_commits` view's trigger): the
    /// challenge consumed and the counter compare-and-set, one commit. When a check fails
    /// the statement changes nothing; a changed counter then consumes the challenge alone.
    public func commitSignIn(consuming challenge: [UInt8], updating r: CredentialRecord, expectedSignCount: UInt32) async throws -> SignInCommit {
        do {
            _ = try await query(
                """
                INSERT INTO sign_in_commits (challenge, id, expected_sign_count, sign_count, backup_state, uv_initialized, last_used_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                [.blob(challenge)] + r.values([.id]).map(SQLiteData.init) + [.integer(SQLiteInt64(expectedSignCount))]
                    + r.values([.signCount, .backupState, .uvInitialized, .lastUsedAt]).map(SQLiteData.init))
            return .committed
        } catch let error as SQLiteError where error.reason == .constraintTriggerFailed {
            // Which check failed: the challenge is gone, or the counter moved (then the challenge is spent all the same).
            return try await consume(challenge: challenge) == nil ? .challengeGone : .counterChanged
        }
    }

    static func record(_ row: SQLiteRow) throws(WebAuthnError) -> CredentialRecord {
        try CredentialRecord(row: SQLiteRowReader(row: row))
    }

    // MARK: ChallengeStore

    /// Keeps a ceremony under its challenge (replacing one under the same challenge),
    /// dropping its binding's oldest beyond ``PendingCeremony/maxPerBinding`` in the same statement.
    public func insert(_ ceremony: PendingCeremony) async throws {
        // The challenges_per_binding trigger keeps a binding's newest ceremonies, in the same statement.
        _ = try await query(
            "INSERT OR REPLACE INTO challenges (challenge, ceremony, expires_at, binding) VALUES (?, ?, ?, ?)",
            [
                .blob(ceremony.challenge), .text(ceremony.json.serialized()), .float(ceremony.expiresAt.timeIntervalSince1970),
                ceremony.binding.map { .blob($0) } ?? .null,
            ])
    }

    /// The ceremony under `challenge`, without removing it.
    public func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await query("SELECT ceremony FROM challenges WHERE challenge = ?", [.blob(challenge)]).first.map(Self.ceremony)
    }

    /// Removes and returns the ceremony under `challenge` in one `DELETE … RETURNING`:
    /// of two concurrent consumers exactly one gets it.
    public func consume(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await query("DELETE FROM challenges WHERE challenge = ? RETURNING ceremony", [.blob(challenge)]).first.map(Self.ceremony)
    }

    /// Removes the ceremonies that expired before `date`; returns how many remain.
    public func sweep(expiredBefore date: Date) async throws -> Int {
        _ = try await query("DELETE FROM challenges WHERE expires_at < ?", [.float(date.timeIntervalSince1970)])
        return Int(try await query("SELECT COUNT(*) AS n FROM challenges").first?.column("n")?.integer ?? 0)
    }

    static func ceremony(_ row: SQLiteRow) throws -> PendingCeremony {
        guard let text = row.column("ceremony")?.string else { throw WebAuthnError(.storageFailure, "challenges.ceremony is not text") }
        return try PendingCeremony(json: JSONValue.parse(text))
    }

    // MARK: AccountStore

    /// The account whose name has the same look-alike key as `name`, if any.
    public func account(named name: String) async throws -> UserEntity? {
        try await query("SELECT name, handle, display_name FROM accounts WHERE name_key = ?", [.text(UserName.lookalikeKey(name))]).first.map(Self.account)
    }

    /// The account with this user handle, if any.
    public func account(handle: [UInt8]) async throws -> UserEntity? {
        try await query("SELECT name, handle, display_name FROM accounts WHERE handle = ?", [.blob(handle)]).first.map(Self.account)
    }

    /// Creates `user` with its first credential in one statement, both or neither.
    /// Throws `username_unavailable` when the name (or its look-alike key) or the
    /// handle is taken, `credential_already_registered` when the credential ID is.
    public func create(_ user: UserEntity, firstCredential r: CredentialRecord) async throws {
        // One statement: the new_accounts_insert trigger inserts both rows or neither.
        // The view's credential columns are the table's, the owner being the account's handle.
        let columns = CredentialColumn.allCases.filter { $0 != .userHandle }
        do {
            _ = try await query(
                "INSERT INTO new_accounts (name, name_key, handle, display_name, \(columns.map(\.rawValue).joined(separator: ", "))) VALUES (\(Self.placeholders(4 + columns.count)))",
                [.text(user.name), .text(UserName.lookalikeKey(user.name)), .blob(user.id), .text(user.displayName)] + r.values(columns).map(SQLiteData.init))
        } catch let error as SQLiteError where Self.isDuplicate(error) {
            // The trigger inserts the account first, so the duplicate is the
            // credential only when no account has the name, key or handle
            // (accounts are never deleted).
            let account = try await query(
                "SELECT 1 AS x FROM accounts WHERE name = ? OR name_key = ? OR handle = ? LIMIT 1",
                [.text(user.name), .text(UserName.lookalikeKey(user.name)), .blob(user.id)])
            guard account.isEmpty else {
                throw WebAuthnError(.usernameUnavailable, "an account named \(user.name.prefix(64)) (or a name that looks the same) exists")
            }
            throw WebAuthnError(
                .credentialAlreadyRegistered, "credential \(Base64URL.encode(r.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
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
        _ = try await query("INSERT OR IGNORE INTO settings (name, value) VALUES ('server_secret', ?)", [.blob(SecureRandom.bytes(32))])
        guard let value = try await query("SELECT value FROM settings WHERE name = 'server_secret'").first?.column("value")?.blob,
            value.readableBytes >= 32
        else { throw WebAuthnError(.storageFailure, "settings.server_secret is unreadable") }
        return Array(value.readableBytesView)
    }

    // MARK: SessionStore

    /// Stores a session (replacing one with the same id hash), dropping the
    /// account's oldest beyond ``SignedInSession/maxPerUser`` in the same statement.
    public func insert(_ session: SignedInSession) async throws {
        // The sessions_per_user trigger keeps the account's newest sessions, in the same statement.
        _ = try await query(
            "INSERT OR REPLACE INTO sessions (id_hash, user_handle, created_at, authenticated_at, expires_at) VALUES (?, ?, ?, ?, ?)",
            [
                .blob(session.idHash), .blob(session.userHandle), .float(session.createdAt.timeIntervalSince1970),
                .float(session.authenticatedAt.timeIntervalSince1970), .float(session.expiresAt.timeIntervalSince1970),
            ])
    }

    /// The session with this id hash, if stored (expired or not).
    public func session(idHash: [UInt8]) async throws -> SignedInSession? {
        guard
            let row = try await query(
                "SELECT id_hash, user_handle, created_at, authenticated_at, expires_at FROM sessions WHERE id_hash = ?", [.blob(idHash)]
            ).first
        else { return nil }
        guard let handle = row.column("user_handle")?.blob, let created = row.column("created_at")?.double,
            let authenticated = row.column("authenticated_at")?.double, let expires = row.column("expires_at")?.double
        else {
            throw WebAuthnError(.storageFailure, "sessions row is unreadable")
        }
        return SignedInSession(
            idHash: idHash, userHandle: Array(handle.readableBytesView), createdAt: Date(timeIntervalSince1970: created),
            authenticatedAt: Date(timeIntervalSince1970: authenticated), expiresAt: Date(timeIntervalSince1970: expires))
    }

    /// Ends a session; nothing happens when there is none.
    public func delete(idHash: [UInt8]) async throws {
        _ = try await query("DELETE FROM sessions WHERE id_hash = ?", [.blob(idHash)])
    }

    /// Removes the sessions that expired before `date`; returns how many remain.
    public func sweepSessions(expiredBefore date: Date) async throws -> Int {
        _ = try await query("DELETE FROM sessions WHERE expires_at < ?", [.float(date.timeIntervalSince1970)])
        return Int(try await query("SELECT COUNT(*) AS n FROM sessions").first?.column("n")?.integer ?? 0)
    }

    /// Ends every session of the account; returns how many.
    public func deleteSessions(userHandle: [UInt8]) async throws -> Int {
        try await query("DELETE FROM sessions WHERE user_handle = ? RETURNING id_hash", [.blob(userHandle)]).count
    }

    // MARK: Account deletion and linked identities

    /// Deletes the account with its credentials, linked identities and sessions
    /// in one statement; false when there is none.
    public func deleteAccount(handle: [UInt8]) async throws -> Bool {
        // The accounts_delete trigger removes its credentials, identities and sessions in this statement.
        !(try await query("DELETE FROM accounts WHERE handle = ? RETURNING handle", [.blob(handle)])).isEmpty
    }

    static let identityColumns = "provider, subject, user_handle, email, email_verified, is_private_email, refresh_token, created_at, updated_at"

    /// The identity of `subject` at `provider`, if linked.
    public func identity(provider: String, subject: String) async throws -> LinkedIdentity? {
        try await query("SELECT \(Self.identityColumns) FROM identities WHERE provider = ? AND subject = ?", [.text(provider), .text(subject)])
            .first.map(Self.identity)
    }

    /// The account's linked identities, oldest first.
    public func identities(forUser userHandle: [UInt8]) async throws -> [LinkedIdentity] {
        try await query("SELECT \(Self.identityColumns) FROM identities WHERE user_handle = ? ORDER BY created_at", [.blob(userHandle)]).map(Self.identity)
    }

    /// Creates `user` with its first identity in one statement, both or neither.
    /// Throws `identity_invalid`, `username_unavailable` or `identity_already_linked`.
    public func create(_ user: UserEntity, firstIdentity i: LinkedIdentity) async throws {
        try i.validate()
        do {
            // One statement: the new_identity_accounts_insert trigger inserts both rows or neither.
            _ = try await query(
                """
                INSERT INTO new_identity_accounts (name, name_key, handle, display_name, provider, subject, email, email_verified,
                                                   is_private_email, refresh_token, created_at, updated_at)
                VALUES (\(Self.placeholders(12)))
                """,
                [.text(user.name), .text(UserName.lookalikeKey(user.name)), .blob(user.id), .text(user.displayName)] + Self.identityValues(i))
        } catch let error as SQLiteError where Self.isDuplicate(error) {
            if try await identity(provider: i.provider, subject: i.subject) != nil { throw LinkedIdentity.alreadyLinked(i.provider) }
            throw WebAuthnError(.usernameUnavailable, "an account named \(user.name.prefix(64)) (or a name that looks the same) exists")
        }
    }

    /// Links an identity to its existing account. Throws `identity_invalid`,
    /// `account_unknown` or `identity_already_linked`.
    public func link(_ i: LinkedIdentity) async throws {
        try i.validate()
        let inserted: [SQLiteRow]
        do {
            inserted = try await query(
                """
                INSERT INTO identities (provider, subject, user_handle, email, email_verified, is_private_email, refresh_token, created_at, updated_at)
                SELECT ?, ?, handle, ?, ?, ?, ?, ?, ? FROM accounts WHERE handle = ? RETURNING subject
                """,
                [.text(i.provider), .text(i.subject)] + Self.identityValues(i).dropFirst(2) + [.blob(i.userHandle)])
        } catch let error as SQLiteError where Self.isDuplicate(error) {
            throw LinkedIdentity.alreadyLinked(i.provider)
        }
        guard !inserted.isEmpty else { throw LinkedIdentity.unknownAccount() }
    }

    /// Replaces the identity's email fields, refresh token and `updatedAt`; false
    /// when it is not linked. Throws `identity_invalid`.
    public func update(_ i: LinkedIdentity) async throws -> Bool {
        try i.validate()
        return
            !(try await query(
                "UPDATE identities SET email = ?, email_verified = ?, is_private_email = ?, refresh_token = ?, updated_at = ? WHERE provider = ? AND subject = ? RETURNING subject",
                Array(Self.identityValues(i)[2...4]) + [
                    Self.identityValues(i)[5], .float(i.updatedAt.timeIntervalSince1970), .text(i.provider), .text(i.subject),
                ])).isEmpty
    }

    /// Moves the link of `subject` to `newSubject` (same account, `updatedAt` set to
    /// `date`); false when `subject` is not linked. Throws `identity_invalid`, or
    /// `identity_already_linked` when `newSubject` is linked already.
    public func relink(provider: String, subject: String, to newSubject: String, at date: Date) async throws -> Bool {
        try LinkedIdentity(provider: provider, subject: newSubject, userHandle: [0], createdAt: date).validate()
        do {
            return
                !(try await query(
                    "UPDATE identities SET subject = ?, updated_at = ? WHERE provider = ? AND subject = ? RETURNING subject",
                    [.text(newSubject), .float(date.timeIntervalSince1970), .text(provider), .text(subject)])).isEmpty
        } catch let error as SQLiteError where Self.isDuplicate(error) {
            throw LinkedIdentity.alreadyLinked(provider)
        }
    }

    /// Removes the link and returns it; nil when it was not linked.
    public func unlink(provider: String, subject: String) async throws -> LinkedIdentity? {
        try await query("DELETE FROM identities WHERE provider = ? AND subject = ? RETURNING \(Self.identityColumns)", [.text(provider), .text(subject)])
            .first.map(Self.identity)
    }

    /// provider, subject, email, email_verified, is_private_email, refresh_token, created_at, updated_at.
    static func identityValues(_ i: LinkedIdentity) -> [SQLiteData] {
        func bool(_ b: Bool?) -> SQLiteData { b.map { .integer($0 ? 1 : 0) } ?? .null }
        return [
            .text(i.provider), .text(i.subject), i.email.map { .text($0) } ?? .null, bool(i.emailVerified), bool(i.isPrivateEmail),
            i.refreshToken.map { .blob($0) } ?? .null, .float(i.createdAt.timeIntervalSince1970), .float(i.updatedAt.timeIntervalSince1970),
        ]
    }

    static func identity(_ row: SQLiteRow) throws -> LinkedIdentity {
        // Matched, not converted: SQLiteNIO's `integer` traps on a REAL out of range.
        func bool(_ name: String) -> Bool? { if case .integer(let v) = row.column(name) { return v != 0 } else { return nil } }
        guard let provider = row.column("provider")?.string, let subject = row.column("subject")?.string,
            let handle = row.column("user_handle")?.blob, let created = row.column("created_at")?.double,
            let updated = row.column("updated_at")?.double
        else {
            throw WebAuthnError(.storageFailure, "identities row is unreadable")
        }
        return LinkedIdentity(
            provider: provider, subject: subject, userHandle: Array(handle.readableBytesView), email: row.column("email")?.string,
            emailVerified: bool("email_verified"), isPrivateEmail: bool("is_private_email"),
            refreshToken: row.column("refresh_token")?.blob.map { Array($0.readableBytesView) },
            createdAt: Date(timeIntervalSince1970: created), updatedAt: Date(timeIntervalSince1970: updated))
    }
}

extension SQLiteData {
    static func blob(_ bytes: [UInt8]) -> SQLiteData { .blob(ByteBuffer(bytes: bytes)) }

    init(_ value: CredentialColumnValue) {
        switch value {
        case .bytes(let bytes): self = .blob(bytes)
        case .integer(let int): self = .integer(SQLiteInt64(int))  // SQLiteInt64 is 64 bits wide on every platform
        case .text(let text): self = .text(text)
        case .double(let double): self = .float(double)
        case .bool(let bool): self = .integer(bool ? 1 : 0)
        case .null: self = .null
        }
    }
}

/// A SQLite row read through the shared credential codec. Integers come
/// from INTEGER values, or from REAL or TEXT ones that hold an exact
/// integer (never SQLiteNIO's trapping conversion); booleans are integers, 0 for false.
struct SQLiteRowReader: CredentialRowReader {
    let row: SQLiteRow

    func value(_ column: String) throws(WebAuthnError) -> SQLiteData {
        guard let value = row.column(column), !value.isNull else { throw unreadable(column) }
        return value
    }

    func bytes(_ column: String) throws(WebAuthnError) -> [UInt8] {
        guard case .blob(let buffer) = try value(column) else { throw unreadable(column, "is not a blob") }
        return Array(buffer.readableBytesView)
    }

    func integer(_ column: String) throws(WebAuthnError) -> Int64 {
        let int: Int64? =
            switch try value(column) {
            case .integer(let int): Int64(exactly: int)
            case .float(let double): Int64(exactly: double)
            case .text(let text): Int64(text)
            case .blob, .null: nil
            }
        guard let int else { throw unreadable(column, "is not an integer") }
        return int
    }

    func text(_ column: String) throws(WebAuthnError) -> String {
        guard let text = try value(column).string else { throw unreadable(column, "is not text") }
        return text
    }

    func double(_ column: String) throws(WebAuthnError) -> Double {
        guard let double = try value(column).double else { throw unreadable(column, "is not a number") }
        return double
    }

    func bool(_ column: String) throws(WebAuthnError) -> Bool { try integer(column) != 0 }

    func isNull(_ column: String) -> Bool { row.column(column)?.isNull ?? true }
}
