internal import CPostgreSQL
import Dispatch
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
internal import WebAuthnCore

// A connection's statements that arrive while it is busy, sent together in libpq's pipeline mode.
extension PostgresConnection {
    /// One statement with text parameters ($1, $2, …), on its own (an implicit transaction).
    ///
    /// Statements that arrive while the connection is busy are sent together, up to
    /// ``maxPipeline`` at a time, in libpq's pipeline mode: each with its own Sync, so each is
    /// still its own transaction and its failure its own, but the server reads them in one
    /// go and the connection's thread waits once for all of them, not once for each.
    /// Throws as ``execute(_:_:retry:)``.
    func query(_ sql: String, _ params: [String?], retry: Retry) async throws -> [Row] {
        try Self.refuseNUL(params)
        return try await withCheckedThrowingContinuation { continuation in
            let start = waitingJobs.withLock { state in
                state.jobs.append(Job(sql: sql, params: params, retry: retry, continuation: continuation))
                guard !state.draining else { return false }
                state.draining = true
                return true
            }
            if start { queue.async { self.drain() } }
        }
    }

    /// How many statements wait for the connection now.
    var waiting: Int { waitingJobs.withLock { $0.jobs.count } }

    /// The most statements sent in one pipeline.
    static let maxPipeline = 32

    /// A statement waiting for ``drain()``.
    struct Job {
        let sql: String
        let params: [String?]
        let retry: Retry
        let continuation: CheckedContinuation<[Row], any Error>
    }

    /// The statements waiting, and whether a drain is queued or running.
    struct Waiting {
        var jobs: [Job] = []
        var draining = false
    }

    /// Runs the statements waiting now (on `queue`), then queues itself again if more came,
    /// so that `run` calls (a close) are not held behind a steady stream of statements.
    private func drain() {
        runWaiting(upTo: Self.maxPipeline)
        let more = waitingJobs.withLock { state in
            if state.jobs.isEmpty { state.draining = false }
            return state.draining
        }
        if more { queue.async { self.drain() } }
    }

    /// Runs up to `limit` of the statements waiting (on `queue`), alone or in one pipeline;
    /// returns how many it took.
    @discardableResult
    func runWaiting(upTo limit: Int) -> Int {
        let jobs = waitingJobs.withLock { state -> [Job] in
            let taken = Array(state.jobs.prefix(limit))
            state.jobs.removeFirst(taken.count)
            return taken
        }
        if jobs.count == 1 {
            let job = jobs[0]
            job.continuation.resume(with: Result { try execute(job.sql, job.params, retry: job.retry) })
        } else if !jobs.isEmpty {
            pipeline(jobs)
        }
        return jobs.count
    }

    /// Sends `jobs` in one pipeline and answers each; a statement that is not prepared yet is
    /// prepared first, and one that cannot be (or any, on a connection that does not look
    /// usable) runs alone through ``execute(_:_:retry:)``, which reconnects and retries by the
    /// same rules. After a pipeline the connection broke in, each statement that was sent is
    /// `lost` (it may have run), each that was not is `notSent`, and both are answered by
    /// ``Retry`` as alone.
    private func pipeline(_ jobs: [Job]) {
        var piped: [(job: Job, name: String, count: Int32)] = []
        var alone: [Job] = []
        if let connection, Self.looksUsable(connection) {
            for job in jobs {
                guard let count = Int32(exactly: job.params.count), case .success(let name?) = prepare(job.sql, parameters: count, on: connection) else {
                    alone.append(job)
                    continue
                }
                piped.append((job, name, count))
            }
        } else {
            alone = jobs
        }
        if piped.count == 1 {
            alone.insert(piped[0].job, at: 0)
            piped = []
        }
        if let connection, !piped.isEmpty {
            if PQstatus(connection) == CONNECTION_OK, PQenterPipelineMode(connection) == 1 {
                let outcomes = pipelined(piped.map { ($0.name, $0.count, $0.job.params) }, on: connection)
                for ((job, _, _), outcome) in zip(piped, outcomes) {
                    switch outcome {
                    case .rows(let rows): job.continuation.resume(returning: rows)
                    case .failed(let failure): job.continuation.resume(throwing: failure)
                    case .notSent where job.retry != .never, .lost where job.retry == .idempotent: alone.append(job)
                    case .notSent(let message), .lost(let message):
                        job.continuation.resume(throwing: WebAuthnError(.storageFailure, "PostgreSQL connection lost: \(message)"))
                    }
                }
            } else {
                alone += piped.map(\.job)
            }
        }
        for job in alone { job.continuation.resume(with: Result { try execute(job.sql, job.params, retry: job.retry) }) }
    }

    /// Sends prepared statements, each followed by a Sync, and reads their results in order;
    /// leaves pipeline mode (the connection is reset by the next statement if it broke).
    private func pipelined(_ statements: [(name: String, count: Int32, params: [String?])], on connection: OpaquePointer) -> [Outcome] {
        var outcomes: [Outcome] = []
        // Send: a statement libpq took may have run once the connection breaks.
        var sent = 0
        var broken: String?
        for statement in statements {
            let cStrings: [UnsafeMutablePointer<CChar>?] = statement.params.map { $0.map { strdup($0) } ?? nil }
            defer { cStrings.forEach { free($0) } }
            let values: [UnsafePointer<CChar>?] = cStrings.map { $0.map { UnsafePointer($0) } }
            guard PQsendQueryPrepared(connection, statement.name, statement.count, values, nil, nil, 0) == 1 else {
                broken = Self.message(connection)
                break
            }
            sent += 1
            _ = roundTrips.increment()
            _ = pipelined.increment()
            guard PQpipelineSync(connection) == 1 else {
                broken = Self.message(connection)
                break
            }
        }
        // Read: each statement's results up to its end (a null result), then its Sync. After a
        // failed send nothing is read (a statement without its Sync would never be answered):
        // what was sent is lost.
        for _ in 0..<sent {
            guard broken == nil else {
                outcomes.append(.lost(broken ?? ""))
                continue
            }
            let (rows, failure, aborted) = Self.results(connection)
            let synced = PQgetResult(connection).map { sync in
                defer { PQclear(sync) }
                return PQresultStatus(sync) == PGRES_PIPELINE_SYNC
            }
            if PQstatus(connection) != CONNECTION_OK || failure?.endsSession == true || synced != true {
                broken = failure?.message ?? Self.message(connection)
                outcomes.append(.lost(broken ?? ""))
            } else if let failure {
                outcomes.append(.failed(failure))
            } else if aborted {
                outcomes.append(.notSent("the pipeline was aborted"))
            } else {
                outcomes.append(.rows(rows))
            }
        }
        outcomes += Array(repeating: Outcome.notSent(broken ?? Self.message(connection)), count: statements.count - sent)
        if broken != nil || PQexitPipelineMode(connection) != 1 {
            // A broken or confused session is not used again: a fresh one (prepared statements
            // forgotten), or, if that fails, the next statement tries again before it is sent.
            try? reset(connection, after: broken)
        }
        return outcomes
    }
}
