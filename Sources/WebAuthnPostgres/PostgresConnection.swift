internal import CPostgreSQL
import Dispatch
internal import Foundation
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
internal import WebAuthnCore
internal import _WebAuthnEncoding

/// How the store's connections talk to the server, beyond what the URL says.
struct PostgresSettings: Sendable {
    /// Seconds libpq waits to connect (`connect_timeout`), unless the URL sets its own.
    var connectTimeout = 5
    /// Milliseconds a statement may run (`statement_timeout`); 0 for no limit.
    var statementTimeout: Int32 = 10_000

    /// `statementTimeout` from a duration: a positive one below a millisecond
    /// is one, not none; a negative one or one beyond `Int32.max` ms is refused.
    static func milliseconds(_ duration: Duration) throws(WebAuthnError) -> Int32 {
        let (seconds, attoseconds) = duration.components
        let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard seconds >= 0, attoseconds >= 0, !overflow,
            case let (total, carry) = ms.addingReportingOverflow((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000), !carry,
            let milliseconds = Int32(exactly: total)
        else {
            throw WebAuthnError(.configurationInvalid, "a statement timeout must be 0 to \(Int32.max) ms; got \(duration)")
        }
        return milliseconds
    }
}

/// One libpq connection, owned here and used by one thread at a time: every
/// call runs on the connection's own serial queue (libpq calls block).
///
/// The connection has a connect timeout, TCP keepalives and a statement
/// timeout. When the server has gone (a restart, a failover,
/// `pg_terminate_backend`), the next statement reconnects (`PQreset`) before
/// it is sent; a statement that fails because the connection broke after it
/// was sent is sent again only if it is safe to repeat (``Retry``), so a
/// consumed challenge or a counter compare-and-set is never applied twice.
final class PostgresConnection: @unchecked Sendable {
    /// Owned `PGconn *`, nil once closed; touched only on `queue` (and in deinit).
    private(set) var connection: OpaquePointer?
    let queue: DispatchQueue
    private let settings: PostgresSettings
    /// The statements prepared on this session (SQL text to name); emptied on reconnect.
    /// Touched on `queue` only.
    private var prepared: [String: String] = [:]
    /// The most statements kept prepared per connection (the stores use a fixed few dozen).
    static let maxPrepared = 256
    /// Statements waiting for the connection (see ``query(_:_:retry:)``, in PostgresConnection+Pipeline.swift).
    let waitingJobs = Locked(Waiting())
    /// Counts the round trips to the server (statements and preparations sent), shared by a pool's connections.
    let roundTrips: AtomicCounter
    /// Counts the statements sent in a pipeline with others, shared by a pool's connections.
    let pipelined: AtomicCounter

    init(
        url: String, settings: PostgresSettings = PostgresSettings(), roundTrips: AtomicCounter = AtomicCounter(),
        pipelined: AtomicCounter = AtomicCounter()
    ) throws(WebAuthnError) {
        self.roundTrips = roundTrips
        self.pipelined = pipelined
        // libpq's keywords before the URL (`dbname`, expanded), so that the URL's own settings win.
        let parameters = [
            ("connect_timeout", String(settings.connectTimeout)),
            ("keepalives", "1"), ("keepalives_idle", "30"), ("keepalives_interval", "10"), ("keepalives_count", "3"),
            ("dbname", url),
        ]
        let keywords = parameters.map { strdup($0.0) } + [nil]
        let values = parameters.map { strdup($0.1) } + [nil]
        defer { (keywords + values).forEach { free($0) } }
        let connection = keywords.map { $0.map { UnsafePointer($0) } }.withUnsafeBufferPointer { k in
            values.map { $0.map { UnsafePointer($0) } }.withUnsafeBufferPointer { v in
                PQconnectdbParams(k.baseAddress, v.baseAddress, 1)
            }
        }
        guard let connection else { throw WebAuthnError(.storageFailure, "PQconnectdbParams failed") }
        do throws(WebAuthnError) {
            guard PQstatus(connection) == CONNECTION_OK else {
                throw WebAuthnError(.storageFailure, "cannot connect to PostgreSQL: \(Self.message(connection))")
            }
            try Self.configure(connection, settings)
        } catch {
            PQfinish(connection)
            throw error
        }
        self.connection = connection
        self.settings = settings
        queue = DispatchQueue(label: "webauthn.postgres")
    }

    deinit { if let connection { PQfinish(connection) } }

    /// libpq's last error on the connection, trimmed.
    static func message(_ connection: OpaquePointer) -> String {
        String(cString: PQerrorMessage(connection)).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Session settings, set on every new or reset connection (not through the
    /// URL's `options`, which a URL may set for its own ends).
    private static func configure(_ connection: OpaquePointer, _ settings: PostgresSettings) throws(WebAuthnError) {
        // The stores' statements are prepared once per session and look rows up by key: a generic
        // plan, made once, serves every execution (PostgreSQL would otherwise plan each of the
        // first five again, and keep planning those whose generic plan it judges no cheaper).
        // No NOTICEs: libpq wrote each to standard error, outside the log (`CREATE TABLE IF NOT EXISTS`
        // at every start: operator review, helper 72); warnings and errors still come.
        guard
            let result = PQexec(
                connection, "SET statement_timeout = \(settings.statementTimeout); SET plan_cache_mode = force_generic_plan; SET client_min_messages = warning")
        else {
            throw WebAuthnError(.storageFailure, "cannot configure the PostgreSQL connection: \(message(connection))")
        }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else {
            throw WebAuthnError(.storageFailure, "cannot configure the PostgreSQL connection: \(message(connection))")
        }
    }

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
        /// A NOT NULL constraint failed.
        var isNotNullViolation: Bool { sqlState == "23502" }
        /// `deadlock_detected`: the server chose this statement's transaction to end a deadlock and
        /// rolled it back, so it took no effect.
        var isDeadlock: Bool { sqlState == "40P01" }

        /// Whether the error ends the session rather than the statement: class 08
        /// (connection exception), or the server shutting down or not yet up.
        var endsSession: Bool { sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(sqlState) }
    }

    /// When a statement may be sent again on a new connection.
    enum Retry {
        /// Never: inside a transaction, which a broken connection has lost.
        case never
        /// Only if it was not sent: the connection was found broken before
        /// sending, and reconnected. For statements that may have taken effect
        /// once sent (inserts, `DELETE … RETURNING`, compare-and-set).
        case ifNotSent
        /// Also once after the connection broke while it ran: reads, and writes
        /// whose repetition leaves the same state and gives the same answer (upserts, sweeps).
        case idempotent
    }

    /// Closes the connection (`PQfinish`) after the statements already queued or waiting;
    /// later ones throw `storage_failure`. Closing again does nothing.
    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                // The statements already waiting run first; later ones find the store closed.
                var left = self.waitingJobs.withLock { $0.jobs.count }
                while left > 0 {
                    let ran = self.runWaiting(upTo: min(left, Self.maxPipeline))
                    if ran == 0 { break }
                    left -= ran
                }
                if let connection = self.connection {
                    PQfinish(connection)
                    self.connection = nil
                }
                continuation.resume()
            }
        }
    }

    /// Runs `body` with exclusive use of the connection, off the caller's thread.
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body(self) }) }
        }
    }

    /// One statement with text parameters ($1, $2, …); call inside `run`.
    /// Throws ``Failure`` for an error of the statement, `storage_failure`
    /// when the connection is broken and the statement may not be sent again.
    func execute(_ sql: String, _ params: [String?] = [], retry: Retry = .ifNotSent) throws -> [Row] {
        try Self.refuseNUL(params)
        guard let connection else { throw WebAuthnError(.storageFailure, "the PostgreSQL store is closed") }
        if retry != .never, !Self.looksUsable(connection) { try reset(connection) }
        switch send(sql, params, on: connection) {
        case .rows(let rows): return rows
        case .failed(let failure): throw failure
        case .notSent(let message) where retry != .never, .lost(let message) where retry == .idempotent:
            try reset(connection, after: message)
            switch send(sql, params, on: connection) {
            case .rows(let rows): return rows
            case .failed(let failure): throw failure
            case .notSent(let message), .lost(let message): throw WebAuthnError(.storageFailure, "PostgreSQL connection lost: \(message)")
            }
        case .notSent(let message), .lost(let message):
            throw WebAuthnError(.storageFailure, "PostgreSQL connection lost: \(message)")
        }
    }

    /// Parameters go to libpq as C strings, which end at a NUL: `x\0y` would be sent as `x` and find
    /// the row of `x` (red team, an Apple user identifier). PostgreSQL text cannot hold a NUL, so such
    /// a parameter is the statement's failure (`character_not_in_repertoire`), before anything is sent.
    static func refuseNUL(_ params: [String?]) throws(Failure) {
        for case let param? in params where param.utf8.contains(0) {
            throw Failure(sqlState: "22021", message: "a text parameter holds a NUL byte, which PostgreSQL text cannot hold")
        }
    }

    /// Whether the connection looks usable before a statement is sent: libpq
    /// says it is, and its idle socket has nothing to read. A server that
    /// ended the session has sent its last message and closed the socket,
    /// which libpq notices only when it reads, after sending.
    static func looksUsable(_ connection: OpaquePointer) -> Bool {
        guard PQstatus(connection) == CONNECTION_OK else { return false }
        let socket = PQsocket(connection)
        guard socket >= 0 else { return false }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    /// Reconnects with the same parameters and settings.
    func reset(_ connection: OpaquePointer, after failure: String? = nil) throws(WebAuthnError) {
        prepared.removeAll()
        PQreset(connection)
        guard PQstatus(connection) == CONNECTION_OK else {
            throw WebAuthnError(.storageFailure, "PostgreSQL connection lost\(failure.map { " (\($0))" } ?? ""), cannot reconnect: \(Self.message(connection))")
        }
        try Self.configure(connection, settings)
    }

    /// What became of one statement.
    enum Outcome {
        case rows([Row])
        /// The statement failed on a working session.
        case failed(Failure)
        /// The connection failed before the statement was sent whole; it cannot have taken effect.
        case notSent(String)
        /// The connection broke after the statement was sent; it may have taken effect.
        case lost(String)
    }

    private func send(_ sql: String, _ params: [String?], on connection: OpaquePointer) -> Outcome {
        // Keep every parameter's C string alive for the call.
        let cStrings: [UnsafeMutablePointer<CChar>?] = params.map { $0.map { strdup($0) } ?? nil }
        defer { cStrings.forEach { free($0) } }
        let values: [UnsafePointer<CChar>?] = cStrings.map { $0.map { UnsafePointer($0) } }
        guard let count = Int32(exactly: params.count) else { return .failed(Failure(sqlState: "", message: "too many parameters")) }
        // A statement libpq could not send whole (with its Sync) was never run:
        // the server runs nothing of an unfinished extended-protocol message sequence.
        // Statements the stores run again and again are prepared once per session (parsed and
        // planned once); utility statements, which cannot be prepared, go as they are.
        let name: String?
        switch prepare(sql, parameters: count, on: connection) {
        case .success(let prepared): name = prepared
        case .failure(let outcome): return outcome.outcome
        }
        let sent =
            if let name {
                PQsendQueryPrepared(connection, name, count, values, nil, nil, 0)
            } else {
                PQsendQueryParams(connection, sql, count, nil, values, nil, nil, 0)
            }
        guard sent == 1 else { return .notSent(Self.message(connection)) }
        _ = roundTrips.increment()
        let (rows, failure, _) = Self.results(connection)
        if PQstatus(connection) != CONNECTION_OK || failure?.endsSession == true {
            return .lost(failure?.message ?? Self.message(connection))
        }
        if let failure { return .failed(failure) }
        return .rows(rows)
    }

    /// An outcome as an error, to return it from ``prepare(_:parameters:on:)``.
    struct PrepareFailure: Error {
        let outcome: Outcome
    }

    /// The name of `sql` prepared on this session, preparing it first (one round trip, once per
    /// session); nil for a statement PostgreSQL cannot prepare, or once the cache is full.
    /// A failure to prepare means the statement itself was never run.
    func prepare(_ sql: String, parameters count: Int32, on connection: OpaquePointer) -> Result<String?, PrepareFailure> {
        if let name = prepared[sql] { return .success(name) }
        let head = sql.drop { $0 == " " || $0 == "\n" }.prefix(7).uppercased()
        guard prepared.count < Self.maxPrepared, ["SELECT", "INSERT", "UPDATE", "DELETE", "WITH"].contains(where: { head.hasPrefix($0) }) else {
            return .success(nil)
        }
        let name = "webauthn_\(prepared.count)"
        guard PQsendPrepare(connection, name, sql, count, nil) == 1 else { return .failure(PrepareFailure(outcome: .notSent(Self.message(connection)))) }
        _ = roundTrips.increment()
        var failure: Failure?
        while let result = PQgetResult(connection) {
            defer { PQclear(result) }
            guard failure == nil, PQresultStatus(result) != PGRES_COMMAND_OK else { continue }
            func field(_ code: Int32) -> String? { PQresultErrorField(result, code).map { String(cString: $0) } }
            failure = Failure(
                sqlState: field(PGDiag.sqlState) ?? "",
                message: String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        if PQstatus(connection) != CONNECTION_OK || failure?.endsSession == true {
            return .failure(PrepareFailure(outcome: .notSent(failure?.message ?? Self.message(connection))))
        }
        if let failure { return .failure(PrepareFailure(outcome: .failed(failure))) }
        prepared[sql] = name
        return .success(name)
    }

    /// Reads every result of the statement being answered, up to its end (a null result), so the
    /// connection is ready for the next one: its rows, the first error, and whether a pipeline
    /// skipped it (aborted).
    static func results(_ connection: OpaquePointer) -> (rows: [Row], failure: Failure?, aborted: Bool) {
        var rows: [Row] = []
        var failure: Failure?
        var aborted = false
        while let result = PQgetResult(connection) {
            defer { PQclear(result) }
            let status = PQresultStatus(result)
            guard failure == nil else { continue }
            if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK {
                rows = Self.rows(result)
            } else if status == PGRES_PIPELINE_ABORTED {
                aborted = true
            } else {
                failure = Self.failure(result)
            }
        }
        return (rows, failure, aborted)
    }

    /// The error a result reports, with its SQLSTATE, table and constraint.
    private static func failure(_ result: OpaquePointer) -> Failure {
        func field(_ code: Int32) -> String? { PQresultErrorField(result, code).map { String(cString: $0) } }
        return Failure(
            sqlState: field(PGDiag.sqlState) ?? "",
            message: String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines),
            table: field(PGDiag.tableName), constraint: field(PGDiag.constraintName))
    }

    private static func rows(_ result: OpaquePointer) -> [Row] {
        let columns = (0..<PQnfields(result)).map { String(cString: PQfname(result, $0)) }
        return (0..<PQntuples(result)).map { row in
            var values: [String: String?] = [:]
            for (i, name) in zip(Int32(0)..., columns) {
                values[name] = PQgetisnull(result, row, i) == 1 ? nil : String(cString: PQgetvalue(result, row, i))
            }
            return Row(values: values)
        }
    }
}
