import Foundation
import ServiceLifecycle
import Testing
@testable @_spi(Testing) import WebAuthnCore
@testable import WebAuthnSQLite
@testable import WebAuthnPostgres
import WebAuthnTesting

/// The contract of CredentialStore, ChallengeStore, AccountStore and
/// SessionStore, run against every backend: in-memory, SQLite and PostgreSQL.
@Suite("Store contract")
struct StoreContractTests {
    typealias Stores = (credentials: any CredentialStore, challenges: any ChallengeStore, accounts: any AccountStore, sessions: any SessionStore)

    struct Backend: Sendable, CustomStringConvertible {
        let description: String
        let open: @Sendable () async throws -> (Stores, @Sendable () async throws -> Void)

        /// Runs `body` with fresh stores and closes them afterwards.
        func with(_ body: (Stores) async throws -> Void) async throws {
            let (stores, close) = try await open()
            do { try await body(stores) } catch { try await close(); throw error }
            try await close()
        }
    }

    /// The throw-away PostgreSQL `make test` starts (Tests/postgres.sh), if any.
    static let postgresURL = ProcessInfo.processInfo.environment["WEBAUTHN_TEST_POSTGRES"]

    static let backends: [Backend] = [
        Backend(description: "in-memory") {
            let credentials = InMemoryCredentialStore()
            return ((credentials, InMemoryChallengeStore(), InMemoryAccountStore(credentials: credentials), InMemorySessionStore()), {})
        },
        Backend(description: "sqlite") {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("contract-\(UUID().uuidString).sqlite").path
            let store = try await SQLiteStore.open(path: path)
            return ((store, store, store, store), { try await store.close() })
        },
    ] + (postgresURL.map { url in
        [Backend(description: "postgres") {
            // A fresh schema per test, so tests running in parallel do not share rows.
            let schema = "contract_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            _ = try await PostgresPool(url: url, size: 1).query("CREATE SCHEMA \(schema)")
            let store = try await PostgresStore.open(url: url + "?options=-c%20search_path%3D\(schema)", connections: 4)
            return ((store, store, store, store), { await store.close() })
        }]
    } ?? [])

    static func record(_ id: [UInt8] = SecureRandom.bytes(16), user: [UInt8] = Array("u1".utf8), count: UInt32 = 0) throws -> CredentialRecord {
        let key = try COSEKey(bytes: CBOREncoder.encode(try SigningKey.generate(.es256).coseKey()))
        return CredentialRecord(id: id, userHandle: user, publicKey: key, signCount: count, transports: ["usb", "nfc"], uvInitialized: false,
                                backupEligible: true, backupState: false, aaguid: AAGUID(bytes: SecureRandom.bytes(16))!, attestationFormat: "packed",
                                createdAt: Date(timeIntervalSince1970: 1_800_000_000))
    }

    static func ceremony(_ challenge: [UInt8] = SecureRandom.bytes(32), binding: [UInt8]? = [7, 7, 7],
                         expiresAt: Date = Date(timeIntervalSince1970: 1_900_000_000.5)) throws -> PendingCeremony {
        PendingCeremony(kind: .registration, challenge: challenge, user: try UserEntity(id: [1, 2], name: "alice", displayName: "Alice"),
                        userHandle: nil, allowCredentials: [[9, 9]], algorithms: [.es256, .edDSA], userVerification: .required,
                        conditionalCreate: true, newAccount: true, binding: binding, expiresAt: expiresAt)
    }

    @Test("credentials: insert, read back every field, refuse a duplicate, list by user, delete", arguments: backends)
    func credentials(backend: Backend) async throws {
        try await backend.with { (stores: Stores) async throws in
            let credentials = stores.credentials
            let r = try Self.record()
            try await credentials.insert(r)
            let back = try #require(try await credentials.credential(id: r.id))
            #expect(back.userHandle == r.userHandle && back.publicKey.bytes == r.publicKey.bytes && back.signCount == 0)
            #expect(back.transports == ["usb", "nfc"] && back.backupEligible && !back.backupState && back.aaguid == r.aaguid)
            #expect(back.attestationFormat == "packed" && back.createdAt == r.createdAt && back.lastUsedAt == nil)
            await #expect(throws: WebAuthnError.self) { try await credentials.insert(try Self.record(r.id)) }
            try await credentials.insert(try Self.record(user: Array("u2".utf8)))
            #expect(try await credentials.credentials(forUser: r.userHandle).count == 1)
            #expect(try await credentials.delete(id: r.id))
            #expect(!(try await credentials.delete(id: r.id)))
            #expect(try await credentials.credential(id: r.id) == nil)
        }
    }

    @Test("credentials: a stored counter outside UInt32, or not a number, reads as storage_failure, never traps")
    func unreadableCounter() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("counter-\(UUID().uuidString).sqlite").path
        let sqlite = try await SQLiteStore.open(path: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let r = try Self.record()
        try await sqlite.insert(r)
        for value in ["4294967296", "-1", "1e300", "'many'", "x'00'"] {
            _ = try await sqlite.connection.query("UPDATE credentials SET sign_count = \(value)")
            #expect(await errorCode { _ = try await sqlite.credential(id: r.id) } == "storage_failure", "\(value)")
        }
        _ = try await sqlite.connection.query("UPDATE credentials SET sign_count = 4294967295.0")
        #expect(try await sqlite.credential(id: r.id)?.signCount == UInt32.max)
        try await sqlite.close()
        guard let url = Self.postgresURL else { return }
        let schema = "counter_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        _ = try await PostgresPool(url: url, size: 1).query("CREATE SCHEMA \(schema)")
        let postgres = try await PostgresStore.open(url: url + "?options=-c%20search_path%3D\(schema)", connections: 1)
        try await postgres.insert(r)
        for value in ["4294967296", "-1"] {
            _ = try await postgres.pool.query("UPDATE credentials SET sign_count = \(value)")
            #expect(await errorCode { _ = try await postgres.credential(id: r.id) } == "storage_failure", "\(value)")
        }
    }

    /// A PostgresStore in a fresh schema, its connections named `application` in pg_stat_activity.
    static func postgresStore(_ url: String, application: String, connections: Int, statementTimeout: Duration = .seconds(10)) async throws -> PostgresStore {
        let schema = "contract_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        _ = try await PostgresPool(url: url, size: 1).query("CREATE SCHEMA \(schema)")
        return try await PostgresStore.open(url: url + "?options=-c%20search_path%3D\(schema)&application_name=\(application)",
                                            connections: connections, statementTimeout: statementTimeout)
    }

    /// Ends the server processes of `application`'s connections (as a restart
    /// or failover would), from another connection, and waits until they are gone.
    static func terminate(_ application: String, admin: PostgresPool) async throws {
        _ = try await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND application_name = $1",
                                  [application])
        for _ in 0..<500 {
            if try await admin.query("SELECT COUNT(*) AS n FROM pg_stat_activity WHERE application_name = $1", [application]).first?["n"] == "0" { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("the backends of \(application) did not end")
    }

    /// Ends the server process of `application`'s connection running `pg_sleep` once it runs.
    static func terminateRunning(_ application: String, admin: PostgresPool) async throws {
        for _ in 0..<500 {
            let ended = try await admin.query(
                "SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND query LIKE '%pg_sleep%'",
                [application])
            if !ended.isEmpty { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("no statement of \(application) ran")
    }

    @Test("postgres: a connection the server ended reconnects; a statement is sent again only when it cannot have taken effect twice",
          .enabled(if: postgresURL != nil))
    func postgresReconnects() async throws {
        let url = try #require(Self.postgresURL)
        let application = "reconnect_" + UUID().uuidString.prefix(8).lowercased()
        let admin = try PostgresPool(url: url, size: 1)
        let store = try await Self.postgresStore(url, application: application, connections: 2)
        let r = try Self.record()
        try await store.insert(r)
        let c = try Self.ceremony(binding: nil)
        try await store.insert(c)

        // Found broken before a statement is sent: each connection reconnects and every statement runs,
        // the ones that must not run twice too.
        try await Self.terminate(application, admin: admin)
        #expect(try await store.consume(challenge: c.challenge)?.challenge == c.challenge)
        #expect(try await store.consume(challenge: c.challenge) == nil)
        try await Self.terminate(application, admin: admin)
        for _ in 0..<2 { #expect(try await store.credential(id: r.id)?.id == r.id) }

        // Broken while a statement runs: a read is sent again on a new connection...
        let read = Task { try await store.pool.query("SELECT 1 AS one, pg_sleep(0.3)", retry: .idempotent) }
        try await Self.terminateRunning(application, admin: admin)
        #expect(try await read.value.first?["one"] == "1")
        // ...a statement that may have taken effect is not: one failed call, and the next call works.
        let write = Task { try await store.pool.query("SELECT 1 AS one, pg_sleep(0.3)") }
        try await Self.terminateRunning(application, admin: admin)
        #expect(await errorCode { _ = try await write.value } == "storage_failure")
        for _ in 0..<2 { #expect(try await store.credential(id: r.id)?.id == r.id) }
        await store.close()
    }

    @Test("postgres: a statement running longer than the statement timeout is cancelled, on new connections too",
          .enabled(if: postgresURL != nil))
    func postgresStatementTimeout() async throws {
        #expect(try PostgresSettings.milliseconds(.seconds(10)) == 10_000)
        #expect(try PostgresSettings.milliseconds(.zero) == 0)
        #expect(try PostgresSettings.milliseconds(.nanoseconds(1)) == 1)
        #expect(throws: WebAuthnError.self) { try PostgresSettings.milliseconds(.seconds(-1)) }
        #expect(throws: WebAuthnError.self) { try PostgresSettings.milliseconds(.seconds(Int64(Int32.max))) }
        let url = try #require(Self.postgresURL)
        let application = "timeout_" + UUID().uuidString.prefix(8).lowercased()
        let store = try await Self.postgresStore(url, application: application, connections: 1, statementTimeout: .milliseconds(200))
        await #expect { _ = try await store.pool.query("SELECT pg_sleep(2)") } throws: { ($0 as? PostgresConnection.Failure)?.sqlState == "57014" }
        try await Self.terminate(application, admin: try PostgresPool(url: url, size: 1))
        #expect(try await store.pool.query("SHOW statement_timeout").first?["statement_timeout"] == "200ms")
        await store.close()
    }

    @Test("stores are services: a graceful shutdown of their group closes them; a closed store throws storage_failure, and closes again harmlessly")
    func services() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("service-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let sqlite = try await SQLiteStore.open(path: path)
        var postgres: PostgresStore?
        if let url = Self.postgresURL {
            postgres = try await Self.postgresStore(url, application: "service_" + UUID().uuidString.prefix(8).lowercased(), connections: 2)
        }
        let stores: [any CredentialStore & ChallengeStore & Service] = [sqlite] + (postgres.map { [$0] } ?? [])
        for store in stores {
            let r = try Self.record()
            try await store.insert(r)
            let group = ServiceGroup(services: [store])
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                #expect(try await store.credential(id: r.id) != nil)
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
            #expect(await errorCode { _ = try await store.credential(id: r.id) } == "storage_failure", "\(type(of: store))")
            #expect(await errorCode { try await store.insert(try Self.record()) } == "storage_failure")
            #expect(await errorCode { _ = try await store.consume(challenge: [1]) } == "storage_failure")
        }
        try await sqlite.close()
        await postgres?.close()
    }

    @Test("sqlite: close waits for the statements running and refuses new ones")
    func sqliteCloseWhileBusy() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("close-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try await SQLiteStore.open(path: path)
        let r = try Self.record()
        try await store.insert(r)
        let outcomes = await withTaskGroup(of: String?.self) { group in
            for i in 0..<64 {
                group.addTask {
                    if i == 8 { return (try? await store.close()) == nil ? "close failed" : nil }
                    return await errorCode { _ = try await store.credential(id: r.id) }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.allSatisfy { $0 == nil || $0 == "storage_failure" }, "\(outcomes)")
        #expect(await errorCode { _ = try await store.credential(id: r.id) } == "storage_failure")
        try await store.close()
    }

    @Test("credentials: the counter update is a compare-and-set", arguments: backends)
    func compareAndSet(backend: Backend) async throws {
        try await backend.with { (stores: Stores) async throws in
            let credentials = stores.credentials
            var r = try Self.record(count: 5)
            try await credentials.insert(r)
            r.signCount = 6
            r.backupState = true
            r.lastUsedAt = Date(timeIntervalSince1970: 1_850_000_000)
            #expect(!(try await credentials.update(r, expectedSignCount: 4)))
            #expect(try await credentials.update(r, expectedSignCount: 5))
            #expect(!(try await credentials.update(r, expectedSignCount: 5)))
            let back = try #require(try await credentials.credential(id: r.id))
            #expect(back.signCount == 6 && back.backupState && back.lastUsedAt == r.lastUsedAt)
            // Concurrent compare-and-sets from the same count: exactly one wins.
            var next = back
            next.signCount = 7
            let candidate = next
            let wins = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<16 { group.addTask { (try? await credentials.update(candidate, expectedSignCount: 6)) ?? false } }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(wins == 1)
        }
    }

    @Test("challenges: stored ceremonies round-trip and are consumed exactly once, even concurrently", arguments: backends)
    func challenges(backend: Backend) async throws {
        try await backend.with { (stores: Stores) async throws in
            let challenges = stores.challenges
            let c = try Self.ceremony()
            try await challenges.insert(c)
            let peeked = try #require(try await challenges.pending(challenge: c.challenge))
            #expect(peeked.user == c.user && peeked.algorithms == c.algorithms && peeked.allowCredentials == c.allowCredentials)
            #expect(peeked.userVerification == .required && peeked.conditionalCreate && peeked.newAccount && peeked.expiresAt == c.expiresAt)
            #expect(peeked.binding == [7, 7, 7])
            let consumers = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<16 { group.addTask { (try? await challenges.consume(challenge: c.challenge)) != nil } }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(consumers == 1)
            #expect(try await challenges.pending(challenge: c.challenge) == nil)
        }
    }

    @Test("challenges: a binding keeps its newest ceremonies only; a sweep removes the expired ones and counts the rest", arguments: backends)
    func challengeBounds(backend: Backend) async throws {
        try await backend.with { (stores: Stores) async throws in
            let challenges = stores.challenges
            let binding = SecureRandom.bytes(32)
            var issued: [[UInt8]] = []
            for i in 0..<(PendingCeremony.maxPerBinding + 4) {
                let c = try Self.ceremony(binding: binding, expiresAt: Date(timeIntervalSince1970: 1_900_000_000 + Double(i)))
                try await challenges.insert(c)
                issued.append(c.challenge)
            }
            var kept: [[UInt8]] = []
            for challenge in issued where try await challenges.pending(challenge: challenge) != nil { kept.append(challenge) }
            #expect(kept == Array(issued.suffix(PendingCeremony.maxPerBinding)))
            // Another binding, and unbound ceremonies, are not affected.
            let other = try Self.ceremony(binding: SecureRandom.bytes(32))
            try await challenges.insert(other)
            let unbound = try Self.ceremony(binding: nil)
            try await challenges.insert(unbound)
            #expect(try await challenges.pending(challenge: other.challenge) != nil)
            // Expired ones go; live ones stay.
            let expired = try Self.ceremony(binding: nil, expiresAt: Date(timeIntervalSince1970: 1_000))
            try await challenges.insert(expired)
            let remaining = try await challenges.sweep(expiredBefore: Date(timeIntervalSince1970: 1_900_000_000 + 5.5))
            #expect(try await challenges.pending(challenge: expired.challenge) == nil)
            #expect(try await challenges.pending(challenge: issued.last!) != nil)
            #expect(try await challenges.pending(challenge: issued[5]) == nil)  // expired at ...005
            // Left: the bound ones expiring at ...006 to ...011 (`other` and `unbound` expired at ...000.5).
            #expect(remaining == 6)
        }
    }

    @Test("accounts: an account exists only with its first credential; names are unique by look-alike key", arguments: backends)
    func accounts(backend: Backend) async throws {
        try await backend.with { (stores: Stores) async throws in
            let accounts = stores.accounts
            // Sixteen concurrent sign-ups for one name: exactly one account, with its credential.
            let outcomes = await withTaskGroup(of: ([UInt8], [UInt8], Bool).self) { group in
                for _ in 0..<16 {
                    group.addTask {
                        let user = UserEntity.new(name: "bob")
                        guard let credential = try? Self.record(user: user.id) else { return (user.id, [], false) }
                        let ok = (try? await accounts.create(user, firstCredential: credential)) != nil
                        return (user.id, credential.id, ok)
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let winners = outcomes.filter(\.2)
            #expect(winners.count == 1)
            let winner = try #require(winners.first)
            #expect(try await accounts.account(named: "bob")?.id == winner.0)
            #expect(try await accounts.account(handle: winner.0)?.name == "bob")
            #expect(try await stores.credentials.credential(id: winner.1)?.userHandle == winner.0)
            for loser in outcomes where !loser.2 {
                #expect(try await stores.credentials.credential(id: loser.1) == nil)
                #expect(try await accounts.account(handle: loser.0) == nil)
            }
            // Look-alikes are the same account: case and full-width forms.
            #expect(try await accounts.account(named: "BOB")?.id == winner.0)
            let lookalike = UserEntity.new(name: "ＢＯＢ")
            #expect(await errorCode { try await accounts.create(lookalike, firstCredential: try Self.record(user: lookalike.id)) } == "username_unavailable")
            // A credential ID that exists: no account either.
            let carol = UserEntity.new(name: "carol")
            #expect(await errorCode { try await accounts.create(carol, firstCredential: try Self.record(winner.1, user: carol.id)) } == "credential_already_registered")
            #expect(try await accounts.account(named: "carol") == nil)
            #expect(try await accounts.account(named: "nobody") == nil)
        }
    }

    @Test("sessions: stored by hash, read back, ended, at most maxPerUser per account, swept when expired", arguments: backends)
    func sessions(backend: Backend) async throws {
        try await backend.with { (stores: Stores) async throws in
            let sessions = stores.sessions
            let user = SecureRandom.bytes(32)
            func session(_ i: Int, user: [UInt8], expires: Double = 1_900_000_000) -> SignedInSession {
                SignedInSession(idHash: SecureRandom.bytes(32), userHandle: user, createdAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(i)),
                                authenticatedAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(i)), expiresAt: Date(timeIntervalSince1970: expires))
            }
            let first = session(0, user: user)
            try await sessions.insert(first)
            #expect(try await sessions.session(idHash: first.idHash) == first)
            try await sessions.delete(idHash: first.idHash)
            #expect(try await sessions.session(idHash: first.idHash) == nil)
            var made: [SignedInSession] = []
            for i in 1...(SignedInSession.maxPerUser + 3) {
                let s = session(i, user: user)
                try await sessions.insert(s)
                made.append(s)
            }
            for (i, s) in made.enumerated() {
                #expect((try await sessions.session(idHash: s.idHash) != nil) == (i >= 3), "session \(i)")
            }
            let old = session(100, user: SecureRandom.bytes(32), expires: 1_000)
            try await sessions.insert(old)
            let remaining = try await sessions.sweepSessions(expiredBefore: Date(timeIntervalSince1970: 1_850_000_000))
            #expect(try await sessions.session(idHash: old.idHash) == nil)
            #expect(remaining == SignedInSession.maxPerUser)
        }
    }
}
