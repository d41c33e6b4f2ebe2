import CPostgreSQL
import Dispatch
import Foundation
import WebAuthnCore

/// One libpq connection, owned here and used by one thread at a time: every
/// call runs on the connection's own serial queue (libpq calls block).
final class PostgresConnection: @unchecked Sendable {
    /// Owned `PGconn *`.
    private let connection: OpaquePointer
    private let queue: DispatchQueue

    init(url: String) throws(WebAuthnError) {
        guard let connection = PQconnectdb(url) else { throw WebAuthnError(.storageFailure, "PQconnectdb failed") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(connection))
            PQfinish(connection)
            throw WebAuthnError(.storageFailure, "cannot connect to PostgreSQL: \(message.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        self.connection = connection
        queue = DispatchQueue(label: "webauthn.postgres")
    }

    deinit { PQfinish(connection) }

    /// A result row: text values by column name (nil for NULL).
    struct Row {
        let values: [String: String?]
        subscript(_ name: String) -> String? { values[name] ?? nil }
    }

    /// A PostgreSQL error with its SQLSTATE and, for an integrity
    /// violation, the table and constraint it concerns.
    struct Failure: Error, CustomStringConvertible {
        let sqlState: String
        let message: String
        var table: String? = nil
        var constraint: String? = nil
        var description: String { "PostgreSQL \(sqlState): \(message)" }

        /// `unique_violation`: a duplicate primary key or unique index entry.
        var isUniqueViolation: Bool { sqlState == "23505" }
    }

    /// Runs `body` with exclusive use of the connection, off the caller's thread.
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body(self) }) }
        }
    }

    /// One statement with text parameters ($1, $2, …); call inside `run`.
    func execute(_ sql: String, _ params: [String?] = []) throws -> [Row] {
        // Keep every parameter's C string alive for the call.
        let cStrings: [UnsafeMutablePointer<CChar>?] = params.map { $0.map { strdup($0) } ?? nil }
        defer { cStrings.forEach { free($0) } }
        let values: [UnsafePointer<CChar>?] = cStrings.map { $0.map { UnsafePointer($0) } }
        guard let result = PQexecParams(connection, sql, Int32(params.count), nil, values, nil, nil, 0) else {
            throw Failure(sqlState: "", message: String(cString: PQerrorMessage(connection)))
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            func field(_ code: Int32) -> String? { PQresultErrorField(result, code).map { String(cString: $0) } }
            throw Failure(sqlState: field(PGDiag.sqlState) ?? "", message: String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines),
                          table: field(PGDiag.tableName), constraint: field(PGDiag.constraintName))
        }
        let columns = (0..<PQnfields(result)).map { String(cString: PQfname(result, $0)) }
        return (0..<PQntuples(result)).map { row in
            var values: [String: String?] = [:]
            for (i, name) in columns.enumerated() {
                values[name] = PQgetisnull(result, row, Int32(i)) == 1 ? nil : String(cString: PQgetvalue(result, row, Int32(i)))
            }
            return Row(values: values)
        }
    }
}

/// A fixed set of connections used round-robin; each serializes its own calls.
final class PostgresPool: Sendable {
    private let connections: [PostgresConnection]
    private let next = AtomicCounter()

    init(url: String, size: Int) throws(WebAuthnError) {
        var connections: [PostgresConnection] = []
        for _ in 0..<max(1, size) { connections.append(try PostgresConnection(url: url)) }
        self.connections = connections
    }

    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await connections[next.increment() % connections.count].run(body)
    }

    func query(_ sql: String, _ params: [String?] = []) async throws -> [PostgresConnection.Row] {
        try await run { try $0.execute(sql, params) }
    }
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
    static func bytea(_ bytes: [UInt8]) -> String { "\\x" + bytes.map { String(format: "%02x", $0) }.joined() }
    static func bytes(_ text: String?) -> [UInt8]? {
        guard let text, text.hasPrefix("\\x") else { return nil }
        let hex = Array(text.utf8.dropFirst(2))
        guard hex.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(hex.count / 2)
        var i = 0
        while i < hex.count {
            guard let b = UInt8(String(decoding: hex[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
            out.append(b)
            i += 2
        }
        return out
    }
    static func bool(_ b: Bool) -> String { b ? "true" : "false" }
    static func double(_ d: Double) -> String { String(format: "%.6f", d) }

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
