import Foundation
import Testing
import WebAuthnCore
@testable import WebAuthnSQLite
import _WebAuthnCrypto

/// What the SQLite store's statements cost per sign-in (issue 13), as SQLite counts it, not
/// timed: the query plans of the reads, and the virtual-machine steps of the inserts whose
/// triggers keep the per-binding and per-user caps.
@Suite("SQLite statement costs")
struct StoreCostTests {
    static func withStore(_ body: (SQLiteStore) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cost-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try await SQLiteStore.open(path: directory.appendingPathComponent("cost.sqlite").path)
        do { try await body(store) } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    @Test("a sign-in's reads sort nothing and merge no indexes: the name's two keys are two index lookups, the credentials sorted in Swift")
    func readPlans() async throws {
        try await Self.withStore { store in
            let keys = SQLiteStore.keys(of: "alice")
            let reads: [(String, [SQLiteData])] = [
                (SQLiteStore.accountWithCredentialsSQL, keys),
                ("SELECT name, handle, display_name FROM accounts WHERE \(SQLiteStore.accountNamedSQL)", keys),
                (SQLiteStore.pendingSQL, [.blob([1]), .blob([2])]),
                ("SELECT * FROM sessions WHERE id_hash = ?", [.blob([3])]),
            ]
            for (sql, binds) in reads {
                let plan = try await store.connection.plan(sql, binds)
                #expect(!plan.isEmpty)
                // Before: MULTI-INDEX OR and two temporary B-trees for the account by name.
                #expect(!plan.contains(where: Self.costly), "\(sql): \(plan)")
            }
        }
    }

    /// A plan line that sorts, merges indexes, or scans a table rather than searching an index.
    static func costly(_ line: String) -> Bool {
        let scansTable = line.hasPrefix("SCAN") && !line.contains("CONSTANT ROW") && !line.contains("subquery")
        return line.contains("TEMP B-TREE") || line.contains("MULTI-INDEX OR") || scansTable
    }

    static func session(_ user: [UInt8], at t: Double) -> [SQLiteData] {
        [.blob(SecureRandom.bytes(32)), .blob(user), .float(t), .float(t), .float(2_000_000_000)]
    }

    static let insertSession = "INSERT INTO sessions (id_hash, user_handle, created_at, authenticated_at, expires_at) VALUES (?, ?, ?, ?, ?)"
    static let insertChallenge = "INSERT INTO challenges (challenge, ceremony, expires_at, binding) VALUES (?, '{}', ?, ?)"

    @Test(
        "the per-user and per-binding caps cost little below the cap and bounded work at it (the old triggers: 100 and 94 steps below, 439 and 246 at it; now 58, 57, 216, 148)"
    )
    func capTriggers() async throws {
        try await Self.withStore { store in
            let db = store.connection
            let user = SecureRandom.bytes(16), binding = SecureRandom.bytes(32)
            // Below the caps: one session, one pending ceremony.
            _ = try await db.query(Self.insertSession, Self.session(user, at: 1))
            _ = try await db.query(Self.insertChallenge, [.blob(SecureRandom.bytes(32)), .float(1), .blob(binding)])
            let sessionBelow = try await db.steps(Self.insertSession, Self.session(user, at: 2))
            let challengeBelow = try await db.steps(Self.insertChallenge, [.blob(SecureRandom.bytes(32)), .float(2), .blob(binding)])
            #expect(sessionBelow <= 75, "\(sessionBelow) steps")
            #expect(challengeBelow <= 75, "\(challengeBelow) steps")
            // At the caps: the next insert drops the oldest.
            for i in 2...SignedInSession.maxPerUser { _ = try await db.query(Self.insertSession, Self.session(user, at: Double(i))) }
            for i in 2...PendingCeremony.maxPerBinding {
                _ = try await db.query(Self.insertChallenge, [.blob(SecureRandom.bytes(32)), .float(Double(i)), .blob(binding)])
            }
            let sessionAt = try await db.steps(Self.insertSession, Self.session(user, at: 100))
            let challengeAt = try await db.steps(Self.insertChallenge, [.blob(SecureRandom.bytes(32)), .float(100), .blob(binding)])
            #expect(sessionAt <= 300, "\(sessionAt) steps")
            #expect(challengeAt <= 200, "\(challengeAt) steps")
            // Measured in a transaction rolled back: nothing changed.
            let sessions = try await db.read("SELECT COUNT(*) AS n FROM sessions WHERE user_handle = ?", [.blob(user)])
            let pending = try await db.read("SELECT COUNT(*) AS n FROM challenges WHERE binding = ?", [.blob(binding)])
            #expect(sessions.first?.column("n")?.integer == SignedInSession.maxPerUser)
            #expect(pending.first?.column("n")?.integer == PendingCeremony.maxPerBinding)
        }
    }
}

extension StoreCostTests {
    @Test("SQLite keeps no memory statistics in this process: its allocations take no process-wide lock")
    func memoryStatisticsOff() async throws {
        try await Self.withStore { store in
            _ = try await store.connection.query(Self.insertSession, Self.session(SecureRandom.bytes(16), at: 1))
            _ = try await store.connection.read("SELECT COUNT(*) AS n FROM sessions")
            #expect(SQLiteDatabase.processSettings == 0, "sqlite3_config refused: SQLite was initialized before the store opened")
            // With the statistics on, the open connections' caches alone count hundreds of KiB.
            #expect(SQLiteDatabase.memoryCounted == 0)
        }
    }

    @Test("reads run on at most maximumReaders connections, many at once; each sees the last committed write; after close none runs")
    func readers() async throws {
        try await Self.withStore { store in
            let db = store.connection
            let readers = try #require(db.readers)
            let user = SecureRandom.bytes(16)
            for round in 1...5 {
                _ = try await db.query(Self.insertSession, Self.session(user, at: Double(round)))
                // More reads at once than connections: each one counts the session just committed.
                let counts = try await withThrowingTaskGroup(of: Int?.self) { group in
                    for _ in 0..<24 {
                        group.addTask {
                            try await db.read("SELECT COUNT(*) AS n FROM sessions WHERE user_handle = ?", [.blob(user)]).first?.column("n")?.integer
                        }
                    }
                    return try await group.reduce(into: [Int?]()) { $0.append($1) }
                }
                #expect(counts == Array(repeating: round, count: 24))
                #expect((1...SQLiteDatabase.maximumReaders).contains(readers.open), "\(readers.open) reader connections")
            }
            // A reader refuses to write, whatever the statement says.
            await #expect(throws: SQLiteError.self) { try await db.read("DELETE FROM sessions", []) }
            #expect(try await db.read("SELECT COUNT(*) AS n FROM sessions", []).first?.column("n")?.integer == 5)
            readers.close()
            #expect(readers.open == 0)
            await #expect(throws: SQLiteError.self) { try await db.read("SELECT 1", []) }
        }
    }
}

extension StoreCostTests {
    /// `PRAGMA synchronous` on the writer: 2 is FULL.
    static func synchronous(_ db: SQLiteDatabase) async throws -> Int? {
        try await db.withWriter { try $0.query("PRAGMA synchronous") }.first?.column("synchronous")?.integer
    }

    @Test("a pending ceremony commits without a sync, its consumption with one; the writer is at FULL after either, and after a failed group")
    func lazyCeremonies() async throws {
        try await Self.withStore { store in
            let db = store.connection
            let c = try StoreContractTests.ceremony(binding: nil)
            let before = db.commits.withLockedValue { $0 }
            try await store.insert(c)
            var after = db.commits.withLockedValue { $0 }
            #expect(after.lazy == before.lazy + 1 && after.durable == before.durable, "the insert was not a lazy commit: \(after)")
            #expect(try await Self.synchronous(db) == 2)
            #expect(try await store.consume(challenge: c.challenge)?.challenge == c.challenge)
            after = db.commits.withLockedValue { $0 }
            #expect(after.durable == before.durable + 1, "the consumption was not synced: \(after)")
            // A group with one durable unit among lazy ones is synced.
            let lazy = SQLiteDatabase.Unit(
                statements: [("INSERT INTO challenges (challenge, ceremony, expires_at) VALUES (?, '{}', 1)", [.blob([1])])], durable: false)
            let durable = SQLiteDatabase.Unit(statements: [("DELETE FROM challenges WHERE challenge = ?", [.blob([1])])])
            _ = await db.group([lazy, durable])
            #expect(db.commits.withLockedValue { $0 }.durable == before.durable + 2)
            // A lazy group that fails leaves the writer at FULL too.
            let failing = SQLiteDatabase.Unit(statements: [("INSERT INTO challenges (challenge) VALUES (NULL)", [])], durable: false)
            let results = await db.group([failing])
            #expect((try? results[0].get()) == nil)
            #expect(try await Self.synchronous(db) == 2)
        }
    }
}
