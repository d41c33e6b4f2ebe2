import Foundation
internal import GRDB
import NIOConcurrencyHelpers
internal import GRDBSQLite
internal import CSQLiteConfig

/// The SQLite store's one door to SQLite, over GRDB: statements are prepared once per
/// connection and kept (GRDB's statement cache), reads run on reader connections that see
/// committed writes only (WAL; ``SQLiteReaders``), and a group of writes runs on the
/// writer connection in one hop. Values and rows are the store's own small types, so no
/// GRDB type leaves this file, its probe (`SQLiteDatabase+Probe.swift`) and the readers.
final class SQLiteDatabase: Sendable {
    let writer: any DatabaseWriter
    /// Whether the database is a file (WAL, a reader pool) rather than in memory or read-only
    /// (one connection, no group commit).
    let isFile: Bool
    /// The reader connections of a file database.
    let readers: SQLiteReaders?
    /// As many as the cores, at least 4: a read runs to its end on the thread that asked for it,
    /// so more connections than threads would sit idle, and fewer would make threads wait.
    static let maximumReaders = max(4, ProcessInfo.processInfo.activeProcessorCount)

    /// SQLite's process-wide settings, made once, before the store's first connection opens
    /// (every place in this module that opens one calls ``configureProcess()`` first): memory
    /// statistics off. With them on, every allocation and free inside SQLite took one
    /// process-wide mutex, which the writer and the readers contended for (SQLite's allocations
    /// were 2.5 % of the server's CPU under load, 0.1 % after; issue 13). SQLite's result code: `SQLITE_MISUSE` if SQLite was already
    /// initialized in this process by other code, which leaves the statistics on and changes
    /// nothing else.
    static let processSettings: Int32 = webauthn_sqlite_disable_memstatus()

    /// Makes ``processSettings`` before a connection opens.
    static func configureProcess() { _ = processSettings }

    /// The memory SQLite counts as in use: 0 while its statistics are off.
    static var memoryCounted: Int64 { sqlite3_memory_used() }

    /// Opens (creating if needed) the database at `path` (`:memory:` for one in memory):
    /// WAL, `synchronous=FULL` (an acknowledged write survives a crash), foreign keys on,
    /// and a busy timeout for another process's writes.
    ///
    /// `readOnly` opens an existing file on one read-only connection and changes nothing in it,
    /// not even its journal mode; every write then fails (`webauthn metadata audit --dry-run`).
    init(path: String, readOnly: Bool = false) throws {
        Self.configureProcess()
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        if readOnly {
            configuration.readonly = true
            writer = try DatabaseQueue(path: path, configuration: configuration)
            isFile = false
            readers = nil
            return
        }
        configuration.foreignKeysEnabled = true
        // Statement journals (one per unit of a group commit) in memory: on disk, past 64 KiB a
        // transaction's journal is a temporary file that takes a write per journaled page.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA temp_store=MEMORY") }
        // GRDB's own readers serve only its pool's checks; the store's reads go to ``SQLiteReaders``.
        configuration.maximumReaderCount = 1
        if path == ":memory:" {
            writer = try DatabaseQueue(configuration: configuration)
            isFile = false
            readers = nil
        } else {
            // The pool opens the file and turns WAL on before any reader of ours opens it.
            writer = try DatabasePool(path: path, configuration: configuration)
            isFile = true
            readers = SQLiteReaders(path: path, maximum: Self.maximumReaders)
        }
        // After the pool is open: turning WAL on, GRDB sets `synchronous=NORMAL` on the writer,
        // after `prepareDatabase` has run. NORMAL syncs the WAL only at checkpoints, so a
        // `COMMIT` could return before its write was on disk.
        try writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous=FULL") }
    }

    /// One statement on a reader (a file database) or the writer (in memory).
    ///
    /// On a file, the read runs on the calling thread, without a hop: a reader in WAL mode never
    /// waits for a lock (it reads the last committed snapshot), and one indexed lookup takes
    /// microseconds, less than the two thread switches an asynchronous access costs. One
    /// statement is its own snapshot: no transaction around it.
    func read(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteRow] {
        if let readers { return try readers.read(sql, binds) }
        do {
            return try await writer.read { db in try Self.run(db, sql, binds) }
        } catch let error as DatabaseError {
            throw SQLiteError(error)
        }
    }

    /// One statement on the writer, as its own transaction (synced).
    func query(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteRow] {
        commits.withLockedValue { $0.durable += 1 }
        do {
            return try await writer.writeWithoutTransaction { db in try Self.run(db, sql, binds) }
        } catch let error as DatabaseError {
            throw SQLiteError(error)
        }
    }

    /// Units of statements in one transaction (`BEGIN IMMEDIATE` … `COMMIT`), in one hop to the
    /// writer. A unit is atomic on its own: a statement that fails a constraint backs out its
    /// unit alone (SQLite's statement rollback for one statement, a savepoint for several), and
    /// the unit is answered with that error; so is a unit whose first statement must return a
    /// row and returns none (``Unit/requiresFirstRow``, with ``SQLiteError/firstRowMissing``). Any
    /// other failure rolls the transaction back and fails every unit (none was committed).
    ///
    /// A group of units that need not be durable alone (``Unit/durable``) commits with
    /// `synchronous=NORMAL`: no sync, so a power loss can undo it (a crash of the process
    /// cannot: its writes are in the kernel). The writer is back at `FULL` before the next group,
    /// and the next durable commit syncs the WAL, and with it every frame written before.
    func group(_ units: [Unit]) async -> [Result<[[SQLiteRow]], any Error>] {
        let durable = units.contains(where: \.durable)
        commits.withLockedValue { durable ? ($0.durable += 1) : ($0.lazy += 1) }
        do {
            return try await writer.writeWithoutTransaction { db in
                guard !durable else { return try Self.runGroup(db, units) }
                _ = try Self.run(db, "PRAGMA synchronous=NORMAL", [])
                let results = Result { try Self.runGroup(db, units) }
                // Back to FULL before the writer runs anything else, whatever the group did. (Setting
                // a connection's flag, with a statement prepared already, does not fail; if it did,
                // the group would fail with it: the writer is never left unsynced in silence.)
                _ = try Self.run(db, "PRAGMA synchronous=FULL", [])
                return try results.get()
            }
        } catch {
            let failure: any Error = (error as? DatabaseError).map(SQLiteError.init) ?? error
            return units.map { _ in .failure(failure) }
        }
    }

    private static func runGroup(_ db: Database, _ units: [Unit]) throws -> [Result<[[SQLiteRow]], any Error>] {
        // The transaction's and the units' control statements are prepared once and kept, as the
        // others are: GRDB's `execute(sql:)` parsed them again for every group (1.4 % of the
        // server's CPU per sign-in, issue 13). Failures, rare, take GRDB's path.
        _ = try run(db, "BEGIN IMMEDIATE", [])
        var results: [Result<[[SQLiteRow]], any Error>] = []
        results.reserveCapacity(units.count)
        do {
            for unit in units { results.append(try runUnit(db, unit)) }
            _ = try run(db, "COMMIT", [])
        } catch {
            try? db.execute(sql: "ROLLBACK")
            throw error
        }
        return results
    }

    /// A statement and its values.
    typealias Statement = (sql: String, binds: [SQLiteData])

    /// Statements that take effect together or not at all.
    struct Unit: Sendable {
        let statements: [Statement]
        /// The first statement must return a row (a `DELETE … RETURNING` that must find one), or
        /// the unit is backed out.
        var requiresFirstRow = false
        /// Whether the unit must survive a power loss once acknowledged. A pending ceremony need
        /// not: losing one only makes its user start again (issue 13). Its consumption, a
        /// counter, a credential, a session must.
        var durable = true
    }

    /// How many groups committed with a sync (`durable`) and without one (`lazy`): the tests check which.
    let commits = NIOLockedValueBox((durable: 0, lazy: 0))

    /// Runs one unit inside the group's transaction: its rows, statement by statement, or the
    /// failure that backed it out. Other failures are thrown (they end the transaction).
    private static func runUnit(_ db: Database, _ unit: Unit) throws -> Result<[[SQLiteRow]], any Error> {
        let statements = unit.statements
        if statements.count == 1 && !unit.requiresFirstRow {
            do {
                return .success([try run(db, statements[0].sql, statements[0].binds)])
            } catch let error as SQLiteError where error.backsOutStatementOnly {
                return .failure(error)
            }
        }
        _ = try run(db, "SAVEPOINT unit", [])
        do {
            var rows: [[SQLiteRow]] = []
            for statement in statements {
                rows.append(try run(db, statement.sql, statement.binds))
                if unit.requiresFirstRow, rows.count == 1, rows[0].isEmpty { throw SQLiteError.firstRowMissing }
            }
            _ = try run(db, "RELEASE unit", [])
            return .success(rows)
        } catch let error as SQLiteError where error.backsOutStatementOnly {
            try db.execute(sql: "ROLLBACK TO unit")
            try db.execute(sql: "RELEASE unit")
            return .failure(error)
        }
    }

    /// Work on the writer outside any transaction (migrations).
    func withWriter<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnectionHandle) throws -> T) async throws -> T {
        do {
            return try await writer.writeWithoutTransaction { db in try body(SQLiteConnectionHandle(db: db)) }
        } catch let error as DatabaseError {
            throw SQLiteError(error)
        }
    }

    func close() throws {
        readers?.close()
        do { try writer.close() } catch let error as DatabaseError { throw SQLiteError(error) }
    }

    /// Runs `sql` with its cached statement; returns its rows (none for most writes).
    ///
    /// GRDB prepares the statement once per connection and keeps it; the values are bound and
    /// the rows read with SQLite's own calls, which costs less than GRDB's generic arguments and
    /// rows. Throws ``SQLiteError``.
    static func run(_ db: Database, _ sql: String, _ binds: [SQLiteData]) throws -> [SQLiteRow] {
        let statement: GRDB.Statement
        do { statement = try db.cachedStatement(sql: sql) } catch let error as DatabaseError { throw SQLiteError(error) }
        return try run(connection: db.sqliteConnection, statement: statement.sqliteStatement, binds)
    }

    /// Binds `binds` to a prepared statement of `connection`, steps it to the end and resets it.
    static func run(connection: OpaquePointer?, statement handle: OpaquePointer, _ binds: [SQLiteData]) throws -> [SQLiteRow] {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        defer { sqlite3_reset(handle) }
        guard Int(sqlite3_bind_parameter_count(handle)) == binds.count else {
            throw SQLiteError(code: SQLITE_RANGE, message: "\(binds.count) values for \(sqlite3_bind_parameter_count(handle)) parameters")
        }
        for (offset, value) in binds.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32
            switch value {
            case .integer(let i): status = sqlite3_bind_int64(handle, index, i)
            case .float(let d): status = sqlite3_bind_double(handle, index, d)
            // Bound by its length, not as a C string: a NUL inside would end it there, and
            // `x\0y` would find the row of `x` (red team, an Apple user identifier).
            case .text(let t):
                var text = t
                guard let count = Int32(exactly: text.utf8.count) else { throw SQLiteError(code: SQLITE_TOOBIG, message: "a text of \(text.utf8.count) bytes") }
                status =
                    count == 0
                    ? sqlite3_bind_text(handle, index, "", 0, transient)
                    : text.withUTF8 { utf8 in
                        utf8.withMemoryRebound(to: CChar.self) { sqlite3_bind_text(handle, index, $0.baseAddress, count, transient) }
                    }
            // An empty blob is a zero-length blob, not NULL (which a nil base address would bind).
            case .blob(let b) where b.isEmpty: status = sqlite3_bind_zeroblob(handle, index, 0)
            case .blob(let b):
                guard let count = Int32(exactly: b.count) else { throw SQLiteError(code: SQLITE_TOOBIG, message: "a blob of \(b.count) bytes") }
                status = b.withUnsafeBytes { sqlite3_bind_blob(handle, index, $0.baseAddress, count, transient) }
            case .null: status = sqlite3_bind_null(handle, index)
            }
            guard status == SQLITE_OK else { throw SQLiteError(connection: connection) }
        }
        var rows: [SQLiteRow] = []
        while true {
            switch sqlite3_step(handle) {
            case SQLITE_ROW: rows.append(SQLiteRow(statement: handle))
            case SQLITE_DONE: return rows
            default: throw SQLiteError(connection: connection)
            }
        }
    }

    /// SQLite copies bound text and blobs (`SQLITE_TRANSIENT`).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// The writer's connection, for synchronous work inside one writer access (migrations).
struct SQLiteConnectionHandle {
    fileprivate let db: Database

    func query(_ sql: String, _ binds: [SQLiteData] = []) throws -> [SQLiteRow] {
        do { return try SQLiteDatabase.run(db, sql, binds) } catch let error as DatabaseError { throw SQLiteError(error) }
    }
}

/// A value bound to, or read from, a statement.
enum SQLiteData: Sendable, Equatable {
    case integer(Int64)
    case float(Double)
    case text(String)
    case blob([UInt8])
    case null

    var isNull: Bool { if case .null = self { true } else { false } }
    var string: String? { if case .text(let s) = self { s } else { nil } }
    var bytes: [UInt8]? { if case .blob(let b) = self { b } else { nil } }
    var integer: Int? {
        switch self {
        case .integer(let i): Int(exactly: i)
        case .float(let d): Int(exactly: d)
        default: nil
        }
    }
    var double: Double? {
        switch self {
        case .float(let d): d
        case .integer(let i): Double(i)
        default: nil
        }
    }

    /// Column `index` of the statement's current row.
    fileprivate init(statement: OpaquePointer?, column index: Int32) {
        switch sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER: self = .integer(sqlite3_column_int64(statement, index))
        case SQLITE_FLOAT: self = .float(sqlite3_column_double(statement, index))
        case SQLITE_TEXT:
            let count = Int(sqlite3_column_bytes(statement, index))
            self = .text(
                sqlite3_column_text(statement, index).map { String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self) } ?? "")
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, index))
            self = .blob(sqlite3_column_blob(statement, index).map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? [])
        default: self = .null
        }
    }
}

/// A result row: its columns by name.
struct SQLiteRow: Sendable {
    private let columns: [(name: String, value: SQLiteData)]

    /// The statement's current row.
    fileprivate init(statement: OpaquePointer?) {
        let count = sqlite3_column_count(statement)
        var columns: [(name: String, value: SQLiteData)] = []
        columns.reserveCapacity(Int(count))
        for index in 0..<count {
            columns.append((sqlite3_column_name(statement, index).map { String(cString: $0) } ?? "", SQLiteData(statement: statement, column: index)))
        }
        self.columns = columns
    }

    /// The value of the column named `name` (exactly), if the row has one.
    func column(_ name: String) -> SQLiteData? { columns.first { $0.name == name }?.value }
}

/// A SQLite failure, by its extended result code.
struct SQLiteError: Error, CustomStringConvertible {
    let extendedCode: Int32
    let message: String

    init(_ error: DatabaseError) {
        extendedCode = error.extendedResultCode.rawValue
        message = error.message ?? "\(error)"
    }

    init(code: Int32, message: String) {
        extendedCode = code
        self.message = message
    }

    /// The connection's last error.
    init(connection: OpaquePointer?) {
        extendedCode = sqlite3_extended_errcode(connection)
        message = sqlite3_errmsg(connection).map { String(cString: $0) } ?? "unknown"
    }

    /// SQLITE_CONSTRAINT (19) and its extended codes.
    var isConstraint: Bool { extendedCode & 0xff == 19 }
    /// A primary key or unique index violation.
    var isDuplicate: Bool { extendedCode == 19 | (6 << 8) || extendedCode == 19 | (8 << 8) || extendedCode == 19 | (10 << 8) }
    /// A NOT NULL constraint failed.
    var isNotNull: Bool { extendedCode == 19 | (5 << 8) }
    /// A trigger's `RAISE(ABORT, …)`.
    var isTriggerAbort: Bool { extendedCode == 19 | (7 << 8) }
    /// Constraint failures back out their statement (or unit) alone; the transaction goes on.
    var backsOutStatementOnly: Bool { isConstraint || self.extendedCode == Self.firstRowMissing.extendedCode }

    /// A unit's first statement returned no row (``SQLiteDatabase/Unit/requiresFirstRow``): the unit was backed out.
    static let firstRowMissing = SQLiteError(code: -1, message: "the unit's first statement found no row")
    /// Whether this is ``firstRowMissing``.
    var isFirstRowMissing: Bool { extendedCode == Self.firstRowMissing.extendedCode }

    var description: String { "SQLite error \(extendedCode): \(message)" }
}
