import Dispatch
internal import GRDBSQLite
import NIOConcurrencyHelpers

/// The reader connections of a file database (WAL), held here rather than in GRDB's pool.
///
/// A read takes an idle connection under a lock, runs its one statement on the calling thread
/// (its own snapshot: WAL readers see the last committed transaction and never wait for the
/// writer) and gives the connection back. GRDB's pool did the same through two
/// `DispatchQueue.sync` calls and a semaphore per read: 4 % of the server's CPU per sign-in,
/// as much as SQLite's own work for the read (issue 13). At most ``maximum`` connections are
/// open; a read beyond them waits for one. Statements are prepared once per connection and kept.
final class SQLiteReaders: Sendable {
    private let path: String
    private let maximum: Int
    /// Counts the connections a read may still take.
    private let slots: DispatchSemaphore
    private let state = NIOLockedValueBox(State())

    private struct State {
        var idle: [Connection] = []
        var open = 0
        var closed = false
    }

    /// How many connections are open (the tests check it never passes ``maximum``).
    var open: Int { state.withLockedValue { $0.open } }

    init(path: String, maximum: Int) {
        self.path = path
        self.maximum = maximum
        slots = DispatchSemaphore(value: maximum)
    }

    /// Runs one statement on a reader connection; returns its rows.
    func read(_ sql: String, _ binds: [SQLiteData]) throws -> [SQLiteRow] {
        slots.wait()
        defer { slots.signal() }
        let taken = try state.withLockedValue { state throws -> Connection? in
            guard !state.closed else { throw SQLiteError(code: SQLITE_MISUSE, message: "the database is closed") }
            if let idle = state.idle.popLast() { return idle }
            state.open += 1
            return nil
        }
        let connection: Connection
        do { connection = try taken ?? Connection(path: path) } catch {
            state.withLockedValue { $0.open -= 1 }
            throw error
        }
        defer {
            let keep = state.withLockedValue { state in
                guard !state.closed else {
                    state.open -= 1
                    return false
                }
                state.idle.append(connection)
                return true
            }
            if !keep { connection.close() }
        }
        return try connection.run(sql, binds)
    }

    /// Closes the idle connections; a read running now closes its own when it ends, and later reads fail.
    func close() {
        let idle = state.withLockedValue { state in
            state.closed = true
            state.open -= state.idle.count
            defer { state.idle = [] }
            return state.idle
        }
        for connection in idle { connection.close() }
    }

    /// One read-only connection and its prepared statements. Used by one read at a time (the
    /// pool hands it to one caller), so it needs no lock of its own.
    final class Connection: @unchecked Sendable {
        private var handle: OpaquePointer?
        private var statements: [String: OpaquePointer] = [:]

        init(path: String) throws {
            var handle: OpaquePointer?
            SQLiteDatabase.configureProcess()
            let status = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil)
            guard status == SQLITE_OK, let handle else {
                let error = handle.map { SQLiteError(connection: $0) } ?? SQLiteError(code: status, message: "cannot open the database")
                sqlite3_close_v2(handle)
                throw error
            }
            self.handle = handle
            sqlite3_extended_result_codes(handle, 1)
            // As the writer: another process's checkpoint can hold the WAL index for a moment.
            sqlite3_busy_timeout(handle, 10_000)
            do { _ = try run("PRAGMA temp_store=MEMORY", []) } catch {
                close()
                throw error
            }
        }

        func run(_ sql: String, _ binds: [SQLiteData]) throws -> [SQLiteRow] {
            try SQLiteDatabase.run(connection: handle, statement: try statement(sql), binds)
        }

        private func statement(_ sql: String) throws -> OpaquePointer {
            if let cached = statements[sql] { return cached }
            var statement: OpaquePointer?
            guard sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK, let statement else {
                throw SQLiteError(connection: handle)
            }
            statements[sql] = statement
            return statement
        }

        func close() {
            for statement in statements.values { sqlite3_finalize(statement) }
            statements = [:]
            sqlite3_close_v2(handle)
            handle = nil
        }

        deinit { if handle != nil { close() } }
    }
}
