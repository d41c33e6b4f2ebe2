import Foundation
internal import GRDB

/// The SQLite store's one door to SQLite, over GRDB: statements are prepared once per
/// connection and kept (GRDB's statement cache), reads run on a pool of reader
/// connections that see committed writes only (WAL), and a group of writes runs on the
/// writer connection in one hop. Values and rows are the store's own small types, so no
/// GRDB type leaves this file.
final class SQLiteDatabase: Sendable {
    private let writer: any DatabaseWriter
    /// Whether the database is a file (WAL, a reader pool) rather than in memory.
    let isFile: Bool
    /// The reader connections of a file database.
    static let maximumReaders = 4

    /// Opens (creating if needed) the database at `path` (`:memory:` for one in memory):
    /// WAL, `synchronous=FULL` (an acknowledged write survives a crash), foreign keys on,
    /// and a busy timeout for another process's writes.
    init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.foreignKeysEnabled = true
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous=FULL") }
        configuration.maximumReaderCount = Self.maximumReaders
        if path == ":memory:" {
            writer = try DatabaseQueue(configuration: configuration)
            isFile = false
        } else {
            writer = try DatabasePool(path: path, configuration: configuration)
            isFile = true
        }
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
            return try writer.read { db in try Self.run(db, sql, binds) }
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
    /// the unit is answered with that error; any other failure rolls the transaction back and
    /// fails every unit (none was committed).
    func group(_ units: [[Statement]]) async -> [Result<[[SQLiteRow]], any Error>] {
        do {
            return try await writer.writeWithoutTransaction { db -> [Result<[[SQLiteRow]], any Error>] in
                try db.execute(sql: "BEGIN IMMEDIATE")
                var results: [Result<[[SQLiteRow]], any Error>] = []
                results.reserveCapacity(units.count)
                do {
                    for unit in units { results.append(try Self.runUnit(db, unit)) }
                    try db.execute(sql: "COMMIT")
                } catch {
                    try? db.execute(sql: "ROLLBACK")
                    throw error
                }
                return results
            }
        } catch {
            let failure: any Error = (error as? DatabaseError).map(SQLiteError.init) ?? error
            return units.map { _ in .failure(failure) }
        }
    }

    /// A statement and its values.
    typealias Statement = (sql: String, binds: [SQLiteData])

    /// Runs one unit inside the group's transaction: its rows, statement by statement, or the
    /// constraint failure that backed it out. Other failures are thrown (they end the transaction).
    private static func runUnit(_ db: Database, _ unit: [Statement]) throws -> Result<[[SQLiteRow]], any Error> {
        if unit.count == 1 {
            do {
                return .success([try run(db, unit[0].sql, unit[0].binds)])
            } catch let error as DatabaseError where SQLiteError(error).backsOutStatementOnly {
                return .failure(SQLiteError(error))
            }
        }
        try db.execute(sql: "SAVEPOINT unit")
        do {
            let rows = try unit.map { try run(db, $0.sql, $0.binds) }
            try db.execute(sql: "RELEASE unit")
            return .success(rows)
        } catch let error as DatabaseError where SQLiteError(error).backsOutStatementOnly {
            try db.execute(sql: "ROLLBACK TO unit")
            try db.execute(sql: "RELEASE unit")
            return .failure(SQLiteError(error))
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
    static func run(_ db: Database, _ sql: String, _ binds: [SQLiteData]) throws -> [SQLiteRow] {
        let statement = try db.cachedStatement(sql: sql)
        let arguments = StatementArguments(binds.map(\.databaseValue))
        let rows = try Row.fetchAll(statement, arguments: arguments)
        return rows.map(SQLiteRow.init)
    }
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

    fileprivate var databaseValue: DatabaseValue {
        switch self {
        case .integer(let i): i.databaseValue
        case .float(let d): d.databaseValue
        case .text(let s): s.databaseValue
        case .blob(let b): Data(b).databaseValue
        case .null: .null
        }
    }

    fileprivate init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let i): self = .integer(i)
        case .double(let d): self = .float(d)
        case .string(let s): self = .text(s)
        case .blob(let data): self = .blob([UInt8](data))
        }
    }
}

/// A result row: its columns by name.
struct SQLiteRow: Sendable {
    private let columns: [(name: String, value: SQLiteData)]

    fileprivate init(_ row: Row) {
        columns = zip(row.columnNames, row.databaseValues).map { ($0, SQLiteData($1)) }
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

    /// SQLITE_CONSTRAINT (19) and its extended codes.
    var isConstraint: Bool { extendedCode & 0xff == 19 }
    /// A primary key or unique index violation.
    var isDuplicate: Bool { extendedCode == 19 | (6 << 8) || extendedCode == 19 | (8 << 8) || extendedCode == 19 | (10 << 8) }
    /// A trigger's `RAISE(ABORT, …)`.
    var isTriggerAbort: Bool { extendedCode == 19 | (7 << 8) }
    /// Constraint failures back out their statement alone; the transaction goes on.
    var backsOutStatementOnly: Bool { isConstraint }

    var description: String { "SQLite error \(extendedCode): \(message)" }
}
