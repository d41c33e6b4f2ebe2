import Foundation
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import GRDB
internal import GRDBSQLite

/// The SQLite store's one door to SQLite, over GRDB: statements are prepared once per
/// connection and kept (GRDB's statement cache), reads run on a pool of reader
/// connections that see committed writes only (WAL), and a group of writes runs on the
/// writer connection in one hop. Values and rows are the store's own small types, so no
/// GRDB type leaves this file.
final class SQLiteDatabase: Sendable {
    private let writer: any DatabaseWriter
    /// Whether the database is a file (WAL, a reader pool) rather than in memory or read-only
    /// (one connection, no group commit).
    let isFile: Bool
    /// The reader connections of a file database.
    static let maximumReaders = 4

    /// What a database file holds, as read without writing to it (``probe(path:named:)``).
    enum Found: Equatable {
        /// Nothing yet: no file, an empty one, or a database without tables.
        case nothing
        /// A `schema_version` at `version` (all its rows integers), and the columns of each
        /// ordinary table (not virtual) by name.
        case store(version: Int, tables: [String: Set<String>])
    }

    /// What the file at `path` holds, read before anything opens it read-write, so that a file
    /// which is not this store's is refused unchanged (`named` is the path as the user gave it,
    /// for messages). Throws `storage_failure`:
    /// - for the file or a journal beside it (`-journal`, `-wal`, `-shm`) that is not a regular
    ///   file: SQLite opens a leftover journal, and a named pipe there hung every command (red
    ///   team, round 25; the database's own path, eighteenth pass);
    /// - for an empty file beside a journal or WAL that holds data: SQLite deletes either on
    ///   opening such a file;
    /// - for anything in the file but an empty `schema_version (version INTEGER)` without a
    ///   version (another application's tables, views, triggers or virtual tables), or a version
    ///   that is not an integer: another application's database, which `serve` took over or
    ///   switched to WAL before it failed;
    /// - with SQLite's own reason when the file cannot be read (busy, a journal to roll back).
    ///
    /// `recover` first rolls back a hot journal a crash left (SQLite does so on any read-write
    /// open; a read-only one cannot read such a file), as `serve` did before the probe existed.
    static func probe(path: String, named: String, recover: Bool) throws -> Found {
        let manager = FileManager.default
        for suffix in ["", "-journal", "-wal", "-shm"] where manager.fileExists(atPath: path + suffix) {
            // Not through links: SQLite opens the journals with O_NOFOLLOW.
            guard (try? manager.attributesOfItem(atPath: path + suffix)[.type] as? FileAttributeType) == .typeRegular else {
                throw WebAuthnError(.storageFailure, "\(named)\(suffix) is not a regular file, so no part of a database of this server; nothing was opened")
            }
        }
        guard manager.fileExists(atPath: path) else { return .nothing }
        func size(_ suffix: String) -> Int { ((try? manager.attributesOfItem(atPath: path + suffix)[.size]) as? NSNumber)?.intValue ?? 0 }
        if size("") == 0 {
            for suffix in ["-journal", "-wal"] where size(suffix) > 0 {
                throw WebAuthnError(
                    .storageFailure,
                    "\(named) is empty beside a \(suffix.dropFirst()) of \(size(suffix)) bytes, which SQLite would delete: restore the database file; nothing was opened"
                )
            }
            return .nothing
        }
        do {
            return try read(path: path, named: named)
        } catch let error as DatabaseError where recover && error.extendedResultCode.rawValue == 776 {
            // SQLITE_READONLY_ROLLBACK: a hot journal, which a read-write connection rolls back
            // on its first read. Then the file is read again, as it was before the crash.
            var handle: OpaquePointer?
            defer { sqlite3_close_v2(handle) }
            guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK,
                sqlite3_exec(handle, "SELECT count(*) FROM sqlite_master", nil, nil, nil) == SQLITE_OK
            else {
                throw WebAuthnError(.storageFailure, "cannot roll back the journal of the SQLite database \(named): \(SQLiteError(connection: handle))")
            }
            do { return try read(path: path, named: named) } catch let error as WebAuthnError { throw error } catch {
                throw WebAuthnError(.storageFailure, "cannot read the SQLite database \(named): \(error); nothing was changed")
            }
        } catch let error as WebAuthnError {
            throw error
        } catch let error as DatabaseError where error.extendedResultCode.rawValue == 776 {
            throw WebAuthnError(
                .storageFailure, "the SQLite database \(named) has a journal to roll back (a crash): webauthn serve rolls it back; nothing was changed")
        } catch {
            throw WebAuthnError(.storageFailure, "cannot read the SQLite database \(named): \(error); nothing was changed")
        }
    }

    /// The probe's read, on a read-only connection.
    private static func read(path: String, named: String) throws -> Found {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db -> Found in
            // Every object but SQLite's own (`sqlite_sequence`, `sqlite_autoindex_…`; compared
            // as a prefix, not with LIKE, whose `_` matches any character).
            let objects = try Row.fetchAll(
                db, sql: "SELECT type, name, sql FROM sqlite_master WHERE lower(substr(name, 1, 7)) <> 'sqlite_'"
            )
            .map { (type: $0["type"] as String? ?? "", name: $0["name"] as String? ?? "", sql: $0["sql"] as String? ?? "") }
            // Ordinary tables: a virtual table (FTS5, say) of the same name is another application's.
            var tables: [String: Set<String>] = [:]
            for object in objects where object.type == "table" && !object.sql.uppercased().hasPrefix("CREATE VIRTUAL TABLE") {
                tables[object.name] = Set(try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?)", arguments: [object.name]))
            }
            let versions = tables["schema_version"] == nil ? [] : try Row.fetchAll(db, sql: "SELECT typeof(version) AS t, version FROM schema_version")
            if let odd = versions.first(where: { ($0["t"] as String?) != "integer" }) {
                throw StoreSchema.versionNotInteger(odd["t"] as String? ?? "?", in: named)
            }
            guard let version = versions.compactMap({ $0["version"] as Int? }).max() else {
                // No version: nothing at all, or the empty version table of a start that failed
                // (this server's: one INTEGER column); else another application's objects.
                let declared = tables["schema_version"] == nil ? [] : try String.fetchAll(db, sql: "SELECT type FROM pragma_table_info('schema_version')")
                guard objects.allSatisfy({ $0.type == "table" && $0.name == "schema_version" }), declared.isEmpty || declared == ["INTEGER"] else {
                    let names = objects.map { "\($0.type) \($0.name.prefix(64))" }.sorted().prefix(5).joined(separator: ", ")
                    throw WebAuthnError(
                        .storageFailure,
                        "\(named) holds another application's objects (\(names)) and no schema version: not a database of this server; its content was not changed"
                    )
                }
                return .nothing
            }
            return .store(version: version, tables: tables)
        }
    }

    /// The tables that `statements` create, with their columns, as an empty database in memory
    /// holds them: what a database of this store has at every version (later versions only add).
    static func tables(createdBy statements: [String]) -> [String: Set<String>] {
        guard let queue = try? DatabaseQueue() else { return [:] }
        return
            (try? queue.write { db in
                for statement in statements { try db.execute(sql: statement) }
                var tables: [String: Set<String>] = [:]
                for name in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") {
                    tables[name] = Set(try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?)", arguments: [name]))
                }
                return tables
            }) ?? [:]
    }

    /// Opens (creating if needed) the database at `path` (`:memory:` for one in memory):
    /// WAL, `synchronous=FULL` (an acknowledged write survives a crash), foreign keys on,
    /// and a busy timeout for another process's writes.
    ///
    /// `readOnly` opens an existing file on one read-only connection and changes nothing in it,
    /// not even its journal mode; every write then fails (`webauthn metadata audit --dry-run`).
    init(path: String, readOnly: Bool = false) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        if readOnly {
            configuration.readonly = true
            writer = try DatabaseQueue(path: path, configuration: configuration)
            isFile = false
            return
        }
        configuration.foreignKeysEnabled = true
        // Statement journals (one per unit of a group commit) in memory: on disk, past 64 KiB a
        // transaction's journal is a temporary file that takes a write per journaled page.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA temp_store=MEMORY") }
        configuration.maximumReaderCount = Self.maximumReaders
        if path == ":memory:" {
            writer = try DatabaseQueue(configuration: configuration)
            isFile = false
        } else {
            writer = try DatabasePool(path: path, configuration: configuration)
            isFile = true
        }
        // After the pool is open: turning WAL on, GRDB sets `synchronous=NORMAL` on the writer,
        // after `prepareDatabase` has run. NORMAL syncs the WAL only at checkpoints, so a
        // `COMMIT` could return before its write was on disk.
        try writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous=FULL") }
    }

    /// One statement on a reader (a file database) or the writer (in memory).
    func read(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteRow] {
        guard isFile else {
            do {
                return try await writer.read { db in try Self.run(db, sql, binds) }
            } catch let error as DatabaseError {
                throw SQLiteError(error)
            }
        }
        return try readHere(sql, binds)
    }

    /// A read on the calling thread, without a hop: a reader of the pool in WAL mode never
    /// waits for a lock (it reads the last committed snapshot), and one indexed lookup takes
    /// microseconds, less than the two thread switches an asynchronous access costs. The pool
    /// holds at most ``maximumReaders`` connections; a caller beyond them waits for one.
    private func readHere(_ sql: String, _ binds: [SQLiteData]) throws -> [SQLiteRow] {
        do {
            // One statement is its own snapshot: no transaction around it (GRDB's `read` opens one).
            return try writer.unsafeRead { db in try Self.run(db, sql, binds) }
        } catch let error as DatabaseError {
            throw SQLiteError(error)
        }
    }

    /// One statement on the writer, as its own transaction.
    func query(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteRow] {
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
    func group(_ units: [Unit]) async -> [Result<[[SQLiteRow]], any Error>] {
        do {
            return try await writer.writeWithoutTransaction { db in try Self.runGroup(db, units) }
        } catch {
            let failure: any Error = (error as? DatabaseError).map(SQLiteError.init) ?? error
            return units.map { _ in .failure(failure) }
        }
    }

    private static func runGroup(_ db: Database, _ units: [Unit]) throws -> [Result<[[SQLiteRow]], any Error>] {
        try db.execute(sql: "BEGIN IMMEDIATE")
        var results: [Result<[[SQLiteRow]], any Error>] = []
        results.reserveCapacity(units.count)
        do {
            for unit in units { results.append(try runUnit(db, unit)) }
            try db.execute(sql: "COMMIT")
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
    }

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
        try db.execute(sql: "SAVEPOINT unit")
        do {
            var rows: [[SQLiteRow]] = []
            for statement in statements {
                rows.append(try run(db, statement.sql, statement.binds))
                if unit.requiresFirstRow, rows.count == 1, rows[0].isEmpty { throw SQLiteError.firstRowMissing }
            }
            try db.execute(sql: "RELEASE unit")
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
        let handle = statement.sqliteStatement
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
            guard status == SQLITE_OK else { throw SQLiteError(connection: db.sqliteConnection) }
        }
        var rows: [SQLiteRow] = []
        while true {
            switch sqlite3_step(handle) {
            case SQLITE_ROW: rows.append(SQLiteRow(statement: handle))
            case SQLITE_DONE: return rows
            default: throw SQLiteError(connection: db.sqliteConnection)
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
