internal import CPostgreSQL
internal import Foundation
internal import WebAuthnCore
internal import _WebAuthnEncoding

// The pool of connections the store uses, and the values it sends and reads: text forms for
// libpq's text protocol, rows through the shared credential codec, error field codes.
/// A fixed set of connections used round-robin; each serializes its own calls.
final class PostgresPool: Sendable {
    private let connections: [PostgresConnection]
    private let next = AtomicCounter()
    /// Round trips to the server over every connection (the tests count them per ceremony step).
    let roundTrips = AtomicCounter()
    /// Statements sent in a pipeline with others (see ``PostgresConnection/query(_:_:retry:)``).
    let pipelined = AtomicCounter()

    init(url: String, size: Int, settings: PostgresSettings = PostgresSettings()) throws(WebAuthnError) {
        var connections: [PostgresConnection] = []
        for _ in 0..<max(1, size) { connections.append(try PostgresConnection(url: url, settings: settings, roundTrips: roundTrips, pipelined: pipelined)) }
        self.connections = connections
    }

    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await connections[next.increment() % connections.count].run(body)
    }

    /// The statements waiting for a busy connection, over all connections.
    var waiting: Int { connections.reduce(0) { $0 + $1.waiting } }

    /// Closes every connection, each after the statements queued on it.
    func close() async {
        for connection in connections { await connection.close() }
    }

    /// One statement on the next connection; see ``PostgresConnection/Retry``. A statement the
    /// server rolled back to end a deadlock (`40P01`) is sent again, up to three times after short
    /// random pauses: it took no effect, each statement being its own transaction. Red team, seventh
    /// pass: sign-ins of one account at once (their sessions trimmed in no fixed order) deadlocked
    /// with each other and with a credential's deletion, which answered 500.
    func query(_ sql: String, _ params: [String?] = [], retry: PostgresConnection.Retry = .ifNotSent) async throws -> [PostgresConnection.Row] {
        var attempt = 0
        while true {
            do {
                return try await connections[next.increment() % connections.count].query(sql, params, retry: retry)
            } catch let error as PostgresConnection.Failure where error.isDeadlock && attempt < Self.deadlockRetries {
                attempt += 1
                _ = deadlocks.increment()
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...20) * attempt))
            }
        }
    }

    /// How many times a statement ended by a deadlock is sent again.
    static let deadlockRetries = 3
    /// Statements sent again after a deadlock (the tests read it).
    let deadlocks = AtomicCounter()
}

/// A counter safe to share between threads.
final class AtomicCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value &+= 1
        return value & Int.max
    }
    /// The count now.
    var current: Int {
        lock.lock()
        defer { lock.unlock() }
        return value & Int.max
    }
}

/// libpq's `PG_DIAG_*` error field codes (postgres_ext.h): character
/// macros, which Swift does not import.
enum PGDiag {
    static let sqlState = Int32(UInt8(ascii: "C"))  // PG_DIAG_SQLSTATE
    static let tableName = Int32(UInt8(ascii: "t"))  // PG_DIAG_TABLE_NAME
    static let constraintName = Int32(UInt8(ascii: "n"))  // PG_DIAG_CONSTRAINT_NAME
}

/// Text forms of values for libpq's text protocol.
enum PGText {
    static func bytea(_ bytes: [UInt8]) -> String { "\\x" + Bytes.hex(bytes) }
    static func bytes(_ text: String?) -> [UInt8]? {
        guard let text, text.hasPrefix("\\x") else { return nil }
        return Bytes.fromHex(String(text.dropFirst(2)))
    }
    static func bool(_ b: Bool) -> String { b ? "true" : "false" }
    /// The shortest text that reads back as `d` exactly (PostgreSQL's float8 input takes it).
    static func double(_ d: Double) -> String { d.description }

    /// The parameter for a credential column value; nil for NULL.
    static func value(_ value: CredentialColumnValue) -> String? {
        switch value {
        case .bytes(let bytes): bytea(bytes)
        case .integer(let int): String(int)
        case .text(let text): text
        case .double(let d): double(d)
        case .bool(let b): bool(b)
        case .null: nil
        }
    }
}

/// A row read through the shared credential codec: bytea in hex form,
/// booleans as `t` / `f`, numbers in their text form.
extension PostgresConnection.Row: CredentialRowReader {
    func value(_ column: String) throws(WebAuthnError) -> String {
        guard let value = self[column] else { throw unreadable(column) }
        return value
    }

    func bytes(_ column: String) throws(WebAuthnError) -> [UInt8] {
        guard let bytes = PGText.bytes(try value(column)) else { throw unreadable(column, "is not bytea") }
        return bytes
    }

    func integer(_ column: String) throws(WebAuthnError) -> Int64 {
        guard let int = Int64(try value(column)) else { throw unreadable(column, "is not an integer") }
        return int
    }

    func text(_ column: String) throws(WebAuthnError) -> String { try value(column) }

    func double(_ column: String) throws(WebAuthnError) -> Double {
        guard let double = Double(try value(column)) else { throw unreadable(column, "is not a number") }
        return double
    }

    func bool(_ column: String) throws(WebAuthnError) -> Bool {
        switch try value(column) {
        case "t": return true
        case "f": return false
        default: throw unreadable(column, "is not a boolean")
        }
    }

    func isNull(_ column: String) -> Bool { self[column] == nil }
}
