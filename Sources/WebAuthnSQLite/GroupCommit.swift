import NIOConcurrencyHelpers

/// Group commit for the SQLite store's writes: the write statements (or atomic units of them) that arrive while the
/// writer is busy run as one transaction (`BEGIN IMMEDIATE` … `COMMIT`) in one hop to the
/// writer connection, so that concurrent ceremonies share one fsync instead of paying one
/// each. Each statement keeps its own atomicity (it is still one statement; a constraint
/// failure backs out that statement only and is reported to its caller alone), and no caller
/// hears of success before the `COMMIT` that made its statement durable has returned. A
/// failure that ends the transaction (I/O, a full disk, a busy database) fails the whole
/// batch: nothing in it was committed.
final class GroupCommitWriter: Sendable {
    private let database: SQLiteDatabase
    private let state = NIOLockedValueBox(State())
    /// The most statements one transaction takes.
    static let maxBatch = 128

    struct Job {
        let unit: SQLiteDatabase.Unit
        let continuation: CheckedContinuation<[[SQLiteRow]], any Error>
    }

    struct State {
        var queue: [Job] = []
        var draining = false
    }

    init(database: SQLiteDatabase) { self.database = database }

    /// Runs one write statement in the next group; returns its rows once the group is committed
    /// (synced to disk, unless the statement need not be ``SQLiteDatabase/Unit/durable``).
    func write(_ sql: String, _ binds: [SQLiteData], durable: Bool = true) async throws -> [SQLiteRow] {
        try await write(SQLiteDatabase.Unit(statements: [(sql, binds)], durable: durable))[0]
    }

    /// Runs statements as one atomic unit in the next group (all of them, or none, if one
    /// fails a constraint); returns each one's rows once the group is committed.
    func write(_ unit: SQLiteDatabase.Unit) async throws -> [[SQLiteRow]] {
        try await withCheckedThrowingContinuation { continuation in
            let start = state.withLockedValue { s in
                s.queue.append(Job(unit: unit, continuation: continuation))
                guard !s.draining else { return false }
                s.draining = true
                return true
            }
            if start { Task { await self.drain() } }
        }
    }

    /// Takes the waiting units in groups until none is left.
    private func drain() async {
        while true {
            let batch = state.withLockedValue { s -> [Job] in
                let taken = Array(s.queue.prefix(Self.maxBatch))
                s.queue.removeFirst(taken.count)
                if taken.isEmpty { s.draining = false }
                return taken
            }
            if batch.isEmpty { return }
            await run(batch)
        }
    }

    private func run(_ batch: [Job]) async {
        if batch.count == 1, batch[0].unit.statements.count == 1, !batch[0].unit.requiresFirstRow, batch[0].unit.durable {
            // Alone: the statement is its own transaction.
            let job = batch[0], statement = job.unit.statements[0]
            do { job.continuation.resume(returning: [try await database.query(statement.sql, statement.binds)]) } catch {
                job.continuation.resume(throwing: error)
            }
            return
        }
        let results = await database.group(batch.map(\.unit))
        for (job, result) in zip(batch, results) { job.continuation.resume(with: result) }
    }
}
