internal import Foundation
public import Logging
public import ServiceLifecycle
import NIOConcurrencyHelpers
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The embedded default store: credentials, pending ceremonies, accounts and
/// signed-in sessions in one SQLite file (WAL, synchronous FULL: an acknowledged write survives
/// a crash; a pending ceremony's insert alone is not synced, and a power loss can lose it). Every state change is one atomic statement: `INSERT` on the
/// primary key (a duplicate fails), `DELETE … RETURNING` to consume a
/// challenge exactly once, `UPDATE … WHERE sign_count = ? RETURNING` for the
/// counter compare-and-set. Several processes may share the file.
///
/// Writes are committed in groups (by one group-commit writer): the statements that arrive while
/// the writer is busy share one transaction and one fsync, and none is acknowledged before
/// its group's `COMMIT` returns. Reads use a second connection, which sees committed writes only.
///
/// A `Service`: run in a `ServiceGroup` (before the services that use it,
/// which shut down first), it closes the database on graceful shutdown.
public final class SQLiteStore: CredentialStore, CredentialAuditing, ChallengeStore, SignInCommitting, AccountStore, LinkedIdentityStore, SessionStore,
    AccountWayInGuarding, Service
{
    /// The database (over GRDB): a writer connection and, for a file, a pool of readers
    /// that see committed writes only. `connection` for the tests and migrations.
    let connection: SQLiteDatabase
    /// Group commit of the writes (nil for an in-memory database, which has no fsync to share).
    let writer: GroupCommitWriter?
    /// The database file's path (`:memory:` for an in-memory database).
    public let path: String
    /// A pthread lock (not `Synchronization.Mutex`): the statements finish on GRDB's
    /// queues, and ThreadSanitizer must see the lock that orders them.
    private let lifecycle = NIOLockedValueBox(Lifecycle())

    /// Statements running, and the close once asked for.
    private struct Lifecycle {
        var running = 0
        var closing: Task<Void, any Error>?
        /// Waiting for `running` to reach zero.
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    /// Opens (creating if needed) and migrates the database at `path`.
    /// Throws `storage_failure` (or `configuration_invalid`) with what went wrong.
    public static func open(path: String, logger: Logger = Logger(label: "webauthn.sqlite")) async throws(WebAuthnError) -> SQLiteStore {
        do { return try await open(path: path, logger: logger, existingOnly: false) } catch { throw storeError(error) }
    }

    /// Any error of opening or closing as a `WebAuthnError` (another type: `storage_failure`).
    static func storeError(_ error: any Error) -> WebAuthnError {
        (error as? WebAuthnError) ?? WebAuthnError(.storageFailure, "the SQLite database: \(error)")
    }

    /// Opens the store's database at `path` only if it is one already, at this build's schema:
    /// for tools that must not create, migrate or take over a file (`webauthn metadata audit`).
    /// Throws `storage_failure` for a file that is missing, not this store's (an empty file,
    /// another application's database), or at another schema version.
    ///
    /// `readOnly` opens it on a read-only connection that changes nothing in the file, not even
    /// its journal mode (the store otherwise switches it to WAL); every write then fails
    /// (SQLite's "attempt to write a readonly database"). For a dry run.
    public static func openExisting(path: String, readOnly: Bool = false, logger: Logger = Logger(label: "webauthn.sqlite")) async throws(WebAuthnError)
        -> SQLiteStore
    {
        do { return try await open(path: path, logger: logger, existingOnly: true, readOnly: readOnly) } catch { throw storeError(error) }
    }

    private static func open(path: String, logger: Logger, existingOnly: Bool, readOnly: Bool = false) async throws -> SQLiteStore {
        // What is checked is what is opened: the absolute path with its links resolved. A relative
        // `file:app.db` was checked as that file and opened by SQLite as the URI of `app.db` (a
        // named pipe there hung the audit; another database there was audited; re-check of the
        // eighteenth pass). An absolute path is never read as a URI.
        let opened = path == ":memory:" ? path : URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let latest = SQLiteMigrations.migrations.last?.version ?? 0
        // Read before anything opens the file read-write: a file that is not this store's (another
        // application's tables, a version that is no integer or is newer than this build's) was
        // switched to WAL, given a table or taken over before it was refused (red team, round 25).
        let found = opened == ":memory:" ? .nothing : try SQLiteDatabase.probe(path: opened, named: path, recover: !existingOnly)
        switch found {
        case .nothing:
            guard !existingOnly else {
                guard FileManager.default.fileExists(atPath: opened) else { throw WebAuthnError(.storageFailure, "no database at \(path); none is created") }
                throw WebAuthnError(.storageFailure, "\(path) is not a database of this server (it has no tables yet); nothing was changed")
            }
            if opened != ":memory:" { createDatabaseFileOwnerOnly(opened) }
        case .store(let version, let tables):
            guard version <= latest else { throw StoreSchema.newerThanBuild(version, latest: latest) }
            // The first version's tables with their columns, which this server has at every
            // version: another application's `schema_version` (and tables of the same names,
            // red team, re-check of round 25) does not make its database this server's. A tool
            // also needs this build's version, and this build's columns in each table.
            let first = Self.firstTables
            guard version >= 1, !first.isEmpty, first.allSatisfy({ name, columns in tables[name].map(columns.isSubset) ?? false }) else {
                throw WebAuthnError(
                    .storageFailure, "\(path) is not a database of this server (its tables are another application's); its content was not changed")
            }
            guard existingOnly else { break }
            guard version == latest else { throw StoreSchema.otherVersion(String(version), latest: latest) }
            guard StoreSchema.tables.allSatisfy({ table in tables[table.name].map { Set(table.columns).isSubset(of: $0) } ?? false }) else {
                throw WebAuthnError(.storageFailure, "\(path) is not a database of this server at this build's schema (its tables lack this build's columns)")
            }
        }
        let database: SQLiteDatabase
        do { database = try SQLiteDatabase(path: opened, readOnly: readOnly) } catch {
            throw WebAuthnError(.storageFailure, "cannot open the SQLite database \(path): \(error)")
        }
        // Read-only: the probe above found this build's version, and nothing is to be migrated.
        if readOnly { return SQLiteStore(database: database, path: path) }
        do {
            try await SQLiteMigrations.migrate(database)
        } catch {
            try? database.close()
            throw error
        }
        return SQLiteStore(database: database, path: path)
    }

    /// The tables of the schema's first version, with their columns.
    static let firstTables = SQLiteDatabase.tables(createdBy: SQLiteMigrations.migrations.first?.statements ?? [])

    init(database: SQLiteDatabase, path: String) {
        self.connection = database
        self.writer = database.isFile ? GroupCommitWriter(database: database) : nil
        self.path = path
    }

    /// Closes the database once the statements already running are done;
    /// later calls throw `storage_failure`. Closing again waits for the first close.
    public func close() async throws(WebAuthnError) {
        let closing = lifecycle.withLockedValue { state in
            if let closing = state.closing { return closing }
            let closing = Task {
                await self.idle()
                try self.connection.close()
            }
            state.closing = closing
            return closing
        }
        do { try await closing.value } catch { throw Self.storeError(error) }
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

    /// How many reads and writes (a statement, or an atomic unit of them) the store has made: the
    /// tests count them per ceremony step.
    let accesses = NIOLockedValueBox((reads: 0, writes: 0))

    /// One statement, unless the store is closing or closed; a write not ``SQLiteDatabase/Unit/durable`` is not synced.
    func query(_ sql: String, _ binds: [SQLiteData] = [], durable: Bool = true) async throws -> [SQLiteRow] {
        try begin()
        defer { finished() }
        let isRead = sql.hasPrefix("SELECT")
        accesses.withLockedValue { isRead ? ($0.reads += 1) : ($0.writes += 1) }
        guard let writer else { return try await connection.query(sql, binds) }
        // Reads on a reader; every other statement is a write, committed in a group.
        return isRead ? try await connection.read(sql, binds) : try await writer.write(sql, binds, durable: durable)
    }

    /// Write statements as one atomic unit (all or, when one fails a constraint, none), in
    /// the next group commit; each statement's rows.
    func write(_ statements: [SQLiteDatabase.Statement], requiresFirstRow: Bool = false) async throws -> [[SQLiteRow]] {
        try begin()
        defer { finished() }
        accesses.withLockedValue { $0.writes += 1 }
        let unit = SQLiteDatabase.Unit(statements: statements, requiresFirstRow: requiresFirstRow)
        guard let writer else { return try await connection.group([unit])[0].get() }
        return try await writer.write(unit)
    }

    /// Counts a statement as running, unless the store is closing or closed.
    private func begin() throws {
        let open = lifecycle.withLockedValue { state in
            guard state.closing == nil else { return false }
            state.running += 1
            return true
        }
        guard open else { throw WebAuthnError(.storageFailure, "the SQLite store is closed") }
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
        try await query(Self.credentialSQL, [.blob(id)]).first.map(Self.record)
    }

    /// The user's credentials, oldest first.
    public func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord] {
        try await query(Self.credentialsOfUserSQL, [.blob(userHandle)])
            .map(Self.record)
    }

    /// Stores a new record in one `INSERT`; throws `credential_already_registered`
    /// when the ID exists.
    public func insert(_ r: CredentialRecord) async throws {
        let statement = Self.inserting(r)
        do {
            _ = try await query(statement.sql, statement.binds)
        } catch let error as SQLiteError where error.isDuplicate {
            throw Self.alreadyRegistered(r)
        }
    }

    static func inserting(_ r: CredentialRecord) -> SQLiteDatabase.Statement {
        (insertCredentialSQL, r.values().map(SQLiteData.init))
    }

    static func alreadyRegistered(_ r: CredentialRecord) -> WebAuthnError {
        WebAuthnError(
            .credentialAlreadyRegistered, "credential \(Base64URL.encode(r.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
    }

    /// `?, ?, …`: `count` parameters.
    static func placeholders(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ", ") }

    /// Compare-and-set: writes the record's counter, backup state, UV-initialized flag
    /// and last use (nothing else) if the stored counter still equals
    /// `expectedSignCount`; returns whether it did.
    public func update(_ r: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool {
        let rows = try await query(
            "UPDATE credentials SET sign_count = ?, backup_state = ?, uv_initialized = ?, last_used_at = ? WHERE id = ? AND sign_count = ? RETURNING id",
            r.values([.signCount, .backupState, .uvInitialized, .lastUsedAt, .id]).map(SQLiteData.init) + [.integer(Int64(expectedSignCount))])
        return !rows.isEmpty
    }

    /// Removes a credential; returns whether it existed.
    public func delete(id: [UInt8]) async throws -> Bool {
        !(try await query("DELETE FROM credentials WHERE id = ? RETURNING id", [.blob(id)])).isEmpty
    }

    /// Deletes `handle`'s credential `id` unless it is the account's last way in, in one statement
    /// (one writer at a time: two deletions of the last two are serialized, and the second sees one).
    package func deleteCredential(id: [UInt8], ofAccount handle: [UInt8]) async throws -> CredentialDeletion {
        let deleted = try await query(
            """
            DELETE FROM credentials WHERE id = ? AND user_handle = ?
              AND ((SELECT COUNT(*) FROM credentials WHERE user_handle = ?) > 1 OR EXISTS (SELECT 1 FROM identities WHERE user_handle = ?))
            RETURNING id
            """, [.blob(id), .blob(handle), .blob(handle), .blob(handle)])
        if !deleted.isEmpty { return .deleted }
        return try await credential(id: id)?.userHandle == handle ? .lastWayIn : .notFound
    }

    /// Unlinks `handle`'s identity unless it is the account's last way to sign in: one statement
    /// under the one writer, as ``deleteCredential(id:ofAccount:)``.
    package func unlinkIdentity(provider: String, subject: String, ofAccount handle: [UInt8]) async throws -> (CredentialDeletion, refreshToken: [UInt8]?) {
        let unlinked = try await query(
            """
            DELETE FROM identities WHERE provider = ? AND subject = ? AND user_handle = ?
              AND (EXISTS (SELECT 1 FROM credentials WHERE user_handle = ?) OR (SELECT COUNT(*) FROM identities WHERE user_handle = ?) > 1)
            RETURNING refresh_token
            """, [.text(provider), .text(subject), .blob(handle), .blob(handle), .blob(handle)])
        if let row = unlinked.first { return (.deleted, row.column("refresh_token")?.bytes) }
        return (try await identity(provider: provider, subject: subject)?.userHandle == handle ? .lastWayIn : .notFound, nil)
    }

    /// Up to `limit` credentials whose IDs sort after `cursor` (BLOBs compare bytewise), in that order.
    public func credentials(after cursor: [UInt8]?, limit: Int) async throws -> [CredentialRecord] {
        try await query(
            Self.credentialsAfterSQL,
            [.blob(cursor ?? []), .integer(Int64(max(0, min(limit, 100_000))))]
        ).map(Self.record)
    }

    /// The scan of ``credentials(after:limit:)`` and ``auditRows(after:limit:)``.
    static let credentialsAfterSQL = "SELECT \(CredentialColumn.list) FROM credentials WHERE id > ? ORDER BY id LIMIT ?"

    /// ``credentials(after:limit:)`` with each row that cannot be read given by its ID.
    public func auditRows(after cursor: [UInt8]?, limit: Int) async throws -> [AuditRow] {
        try await query(
            Self.credentialsAfterSQL,
            [.blob(cursor ?? []), .integer(Int64(max(0, min(limit, 100_000))))]
        ).map { row throws(WebAuthnError) in
            do throws(WebAuthnError) { return .record(try Self.record(row)) } catch {
                return .unreadable(id: try SQLiteRowReader(row: row).bytes(CredentialColumn.id.rawValue), reason: error.message)
            }
        }
    }

    /// Sets or clears the flag of credential `id`, in one `UPDATE`; returns whether it exists.
    public func setFlag(_ flag: CredentialFlag?, id: [UInt8]) async throws -> Bool {
        !(try await query(
            "UPDATE credentials SET flag = ? WHERE id = ? RETURNING id", [flag.map { .text($0.json.serialized()) } ?? .null, .blob(id)])).isEmpty
    }

    /// Sets or clears the owner's name of a credential of `userHandle`, in one `UPDATE`; returns whether it did.
    public func rename(id: [UInt8], ofUser userHandle: [UInt8], to name: String?) async throws -> Bool {
        !(try await query(
            "UPDATE credentials SET name = ? WHERE id = ? AND user_handle = ? RETURNING id", [name.map(SQLiteData.text) ?? .null, .blob(id), .blob(userHandle)]))
            .isEmpty
    }

    // The statements of every ceremony, built once (each call then hashes the same text to find its prepared statement).
    static let pendingSQL = """
        SELECT (SELECT ceremony FROM challenges WHERE challenge = ?) AS pending_ceremony, \(CredentialColumn.listOfC)
        FROM (SELECT 1 AS one) LEFT JOIN credentials c ON c.id = ?
        """
    static let credentialSQL = "SELECT \(CredentialColumn.list) FROM credentials WHERE id = ?"
    static let credentialsOfUserSQL = "SELECT \(CredentialColumn.list) FROM credentials WHERE user_handle = ? ORDER BY created_at"
    static let insertCredentialSQL = "INSERT INTO credentials (\(CredentialColumn.list)) VALUES (\(placeholders(CredentialColumn.allCases.count)))"
    static let accountWithCredentialsSQL = """
        SELECT a.name AS account_name, a.handle AS account_handle, a.display_name AS account_display_name, \(CredentialColumn.listOfC)
        FROM accounts a LEFT JOIN credentials c ON c.user_handle = a.handle WHERE a.\(accountNamedSQL)
        """

    static func record(_ row: SQLiteRow) throws(WebAuthnError) -> CredentialRecord {
        try CredentialRecord(row: SQLiteRowReader(row: row))
    }
}

extension SQLiteData {
    init(_ value: CredentialColumnValue) {
        switch value {
        case .bytes(let bytes): self = .blob(bytes)
        case .integer(let int): self = .integer(int)
        case .text(let text): self = .text(text)
        case .double(let double): self = .float(double)
        case .bool(let bool): self = .integer(bool ? 1 : 0)
        case .null: self = .null
        }
    }
}

/// A SQLite row read through the shared credential codec. Integers come
/// from INTEGER values, or from REAL or TEXT ones that hold an exact
/// integer (never a trapping conversion); booleans are integers, 0 for false.
struct SQLiteRowReader: CredentialRowReader {
    let row: SQLiteRow

    func value(_ column: String) throws(WebAuthnError) -> SQLiteData {
        guard let value = row.column(column), !value.isNull else { throw unreadable(column) }
        return value
    }

    func bytes(_ column: String) throws(WebAuthnError) -> [UInt8] {
        guard case .blob(let bytes) = try value(column) else { throw unreadable(column, "is not a blob") }
        return bytes
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
