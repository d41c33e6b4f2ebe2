import Foundation
import ServiceLifecycle
import Testing
@testable import WebAuthnCore
@testable import WebAuthnSQLite
@testable import WebAuthnPostgres
import WebAuthnTesting
import WebAuthnMetadata
import WebAuthnConformance
import _WebAuthnEncoding
import _WebAuthnCrypto

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

    static let backends: [Backend] =
        [
            Backend(description: "in-memory") {
                let credentials = InMemoryCredentialStore()
                return ((credentials, InMemoryChallengeStore(), InMemoryAccountStore(credentials: credentials), InMemorySessionStore()), {})
            },
            Backend(description: "sqlite") {
                let path = FileManager.default.temporaryDirectory.appendingPathComponent("contract-\(UUID().uuidString).sqlite").path
                let store = try await SQLiteStore.open(path: path)
                return (
                    (store, store, store, store),
                    {
                        try await store.close()
                        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
                    }
                )
            },
        ]
        + (postgresURL.map { url in
            [
                Backend(description: "postgres") {
                    // A fresh schema per test, so tests running in parallel do not share rows.
                    let schema = "contract_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
                    _ = try await PostgresPool(url: url, size: 1).query("CREATE SCHEMA \(schema)")
                    let store = try await PostgresStore.open(url: url + "?options=-c%20search_path%3D\(schema)", connections: 4)
                    return ((store, store, store, store), { await store.close() })
                }
            ]
        } ?? [])

    static func record(_ id: [UInt8] = SecureRandom.bytes(16), user: [UInt8] = Array("u1".utf8), count: UInt32 = 0) throws -> CredentialRecord {
        let key = try COSEKey(bytes: CBOREncoder.encode(try SigningKey.generate(.es256).coseKey()))
        return CredentialRecord(
            id: id, userHandle: user, publicKey: key, signCount: count, transports: ["usb", "nfc"], uvInitialized: false,
            backupEligible: true, backupState: false, aaguid: AAGUID(bytes: SecureRandom.bytes(16))!, attestationFormat: "packed",
            createdAt: Date(timeIntervalSince1970: 1_800_000_000))
    }

    static func ceremony(
        _ challenge: [UInt8] = SecureRandom.bytes(32), binding: [UInt8]? = [7, 7, 7],
        expiresAt: Date = Date(timeIntervalSince1970: 1_900_000_000.5)
    ) throws -> PendingCeremony {
        PendingCeremony(
            kind: .registration, challenge: challenge, user: try UserEntity(id: [1, 2], name: "alice", displayName: "Alice"),
            userHandle: nil, allowCredentials: [[9, 9]], algorithms: [.es256, .edDSA], userVerification: .required,
            conditionalCreate: true, newAccount: true, binding: binding, expiresAt: expiresAt)
    }

    /// The public contract suite (WebAuthnTesting.StoreContract), every check on every backend.
    static let cases: [(Backend, StoreContract.Check)] = backends.flatMap { b in StoreContract.checks.map { (b, $0) } }

    @Test("the store contract (WebAuthnTesting.StoreContract)", arguments: cases)
    func contract(backend: Backend, check: StoreContract.Check) async throws {
        try await StoreContract.run(check) {
            let (stores, close) = try await backend.open()
            return (
                StoreContract.Stores(
                    credentials: stores.credentials, challenges: stores.challenges, accounts: stores.accounts, sessions: stores.sessions,
                    identities: stores.accounts as! any LinkedIdentityStore), close
            )
        }
    }

    @Test("the contract suite catches a store that breaks its promise")
    func catchesABrokenStore() async throws {
        // A challenge store that hands a ceremony out twice.
        final class Leaky: ChallengeStore, @unchecked Sendable {
            let inner = InMemoryChallengeStore()
            func insert(_ ceremony: PendingCeremony) async throws { try await inner.insert(ceremony) }
            func pending(challenge: [UInt8]) async throws -> PendingCeremony? { try await inner.pending(challenge: challenge) }
            func consume(challenge: [UInt8]) async throws -> PendingCeremony? { try await inner.pending(challenge: challenge) }
            func sweep(expiredBefore date: Date) async throws -> Int { try await inner.sweep(expiredBefore: date) }
        }
        let check = try #require(StoreContract.checks.first { $0.name == "challenges" })
        await #expect(throws: StoreContract.Failure.self) {
            try await StoreContract.run(check) {
                let credentials = InMemoryCredentialStore()
                let accounts = InMemoryAccountStore(credentials: credentials)
                return (
                    StoreContract.Stores(
                        credentials: credentials, challenges: Leaky(), accounts: accounts, sessions: InMemorySessionStore(),
                        identities: accounts), {}
                )
            }
        }
    }

    @Test("credentials: hostile stored properties, flags and attestation chains read as nothing or storage_failure, never trap")
    func unreadableNewColumns() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("columns-\(UUID().uuidString).sqlite").path
        let sqlite = try await SQLiteStore.open(path: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let r = try Self.record()
        try await sqlite.insert(r)
        // properties and flag: JSON the engine wrote; anything else (or over 4 KiB, or deeper than 2)
        // is no properties, and a flag that cannot be read (the credential stays flagged: red
        // team, seventeenth pass, read as unflagged).
        let deep = String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000)
        for value in ["'not json'", "'\(deep)'", "'{\"credProtect\": 99, \"prf\": \"yes\"}'", "'" + String(repeating: " ", count: 5000) + "{}'"] {
            _ = try await sqlite.connection.query("UPDATE credentials SET properties = \(value), flag = \(value)")
            let read = try await sqlite.credential(id: r.id)
            #expect(read?.flag == .unreadable && read?.properties.credentialProtection == nil && read?.properties.prfEnabled == nil, "\(value.prefix(40))")
        }
        // attestation_chain: a CBOR array of at most 8 byte strings of at most 16 KiB; anything else is storage_failure.
        let nine = "x'89" + String(repeating: "41" + "00", count: 9) + "'"
        let big = "x'81" + "5940" + "01" + String(repeating: "00", count: 16385) + "'"  // one 16,385-byte string
        for value in ["x'ff'", "x'a0'", "x'8101'", nine, big, "'text'"] {
            _ = try await sqlite.connection.query("UPDATE credentials SET attestation_chain = \(value)")
            #expect(await errorCode { _ = try await sqlite.credential(id: r.id) } == "storage_failure", "\(value.prefix(20))")
        }
        _ = try await sqlite.connection.query("UPDATE credentials SET attestation_chain = x''")
        #expect(try await sqlite.credential(id: r.id)?.attestationChain == [])
        try await sqlite.close()
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

    @Test("an upgrade computes the look-alike keys of existing accounts again: a Lisu name made before is the Latin account's look-alike after")
    func lookalikeKeysRecomputed() async throws {
        // Accounts made before the look-alike tables changed hold keys of the old tables: written
        // here as their names, with the schema set back to before the last recomputation. Only the
        // skeleton tables (SQLite 11, PostgreSQL 13) make `rnary` the key of `mary`.
        // Accounts made before the capitals key (SQLite 11, PostgreSQL 13) get one: `борис` is then
        // found as `Борис`, and taken in every case.
        let lisuAlice = "\u{A4EE}\u{A4E1}\u{A4F2}\u{A4DA}\u{A4F0}", rnary = "rnary", boris = "борис"
        func check(_ store: any AccountStore, _ handles: [String: [UInt8]]) async throws {
            #expect(try await store.account(named: "mary")?.id == handles[rnary], "the old account now holds its look-alike key")
            #expect(try await store.account(named: "alice")?.id == handles["alice"], "of two accounts with one key, the first keeps it")
            #expect(try await store.account(handle: try #require(handles[lisuAlice]))?.name == lisuAlice, "the later one is kept")
            #expect(await errorCode { try await store.create(UserEntity.new(name: "MARY"), firstCredential: try Self.record()) } == "username_unavailable")
            #expect(try await store.account(named: "Борис")?.id == handles[boris], "the old account has its capitals key")
            #expect(await errorCode { try await store.create(UserEntity.new(name: "Борис"), firstCredential: try Self.record()) } == "username_unavailable")
        }
        func prepare(_ create: (UserEntity) async throws -> Void) async throws -> [String: [UInt8]] {
            var handles: [String: [UInt8]] = [:]
            for name in ["alice", "placeholder-1", "placeholder-2", boris] {
                let user = UserEntity.new(name: name)
                try await create(user)
                handles[name] = user.id
            }
            handles[lisuAlice] = handles["placeholder-1"]
            handles[rnary] = handles["placeholder-2"]
            return handles
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(UUID().uuidString).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        var sqlite = try await SQLiteStore.open(path: path)
        let handles = try await prepare { [sqlite] in try await sqlite.create($0, firstCredential: try Self.record(user: $0.id)) }
        for (old, name) in [("placeholder-1", lisuAlice), ("placeholder-2", rnary)] {
            _ = try await sqlite.connection.query("UPDATE accounts SET name = ?, name_key = ? WHERE name = ?", [.text(name), .text(name), .text(old)])
        }
        // The schema of version 10: no capitals key, nor the views that write it.
        for statement in [
            "DROP VIEW new_accounts", "DROP VIEW new_identity_accounts", "DROP INDEX accounts_by_capitals_key", "ALTER TABLE accounts DROP COLUMN capitals_key",
            "ALTER TABLE identities DROP COLUMN email_enabled", "ALTER TABLE identities DROP COLUMN email_changed_at",
            "DELETE FROM schema_version WHERE version >= 11",
        ] {
            _ = try await sqlite.connection.query(statement)
        }
        try await sqlite.close()
        sqlite = try await SQLiteStore.open(path: path)
        try await check(sqlite, handles)
        try await sqlite.close()

        guard let url = Self.postgresURL else { return }
        let postgres = try await Self.postgresStore(url, application: "keys", connections: 1)
        let pgHandles = try await prepare { try await postgres.create($0, firstCredential: try Self.record(user: $0.id)) }
        for (old, name) in [("placeholder-1", lisuAlice), ("placeholder-2", rnary)] {
            _ = try await postgres.pool.query("UPDATE accounts SET name = $1, name_key = $1 WHERE name = $2", [name, old])
        }
        _ = try await postgres.pool.query("ALTER TABLE accounts DROP COLUMN capitals_key")
        _ = try await postgres.pool.query("ALTER TABLE identities DROP COLUMN email_enabled, DROP COLUMN email_changed_at")
        _ = try await postgres.pool.query("DELETE FROM schema_version WHERE version >= 13")
        let schema = try #require(try await postgres.pool.query("SELECT current_schema() AS s").first?["s"])
        await postgres.close()
        let reopened = try await PostgresStore.open(url: url + "?options=-c%20search_path%3D\(schema)", connections: 1)
        try await check(reopened, pgHandles)
        await reopened.close()
    }

    /// A PostgresStore in a fresh schema, its connections named `application` in pg_stat_activity.
    static func postgresStore(_ url: String, application: String, connections: Int, statementTimeout: Duration = .seconds(10)) async throws -> PostgresStore {
        let schema = "contract_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        _ = try await PostgresPool(url: url, size: 1).query("CREATE SCHEMA \(schema)")
        return try await PostgresStore.open(
            url: url + "?options=-c%20search_path%3D\(schema)&application_name=\(application)",
            connections: connections, statementTimeout: statementTimeout)
    }

    /// Ends the server processes of `application`'s connections (as a restart
    /// or failover would), from another connection, and waits until they are gone.
    static func terminate(_ application: String, admin: PostgresPool) async throws {
        _ = try await admin.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND application_name = $1",
            [application])
        for _ in 0..<500 {
            if try await admin.query("SELECT COUNT(*) AS n FROM pg_stat_activity WHERE application_name = $1", [application]).first?["n"] == "0" { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("the backends of \(application) did not end")
    }

    /// Ends the server process of `application`'s connection running `pg_sleep` once it runs.
    static func terminateRunning(_ application: String, admin: PostgresPool, matching pattern: String = "%pg_sleep%") async throws {
        // The statement sleeps 2 s: long enough to be seen running on a loaded CI machine.
        for _ in 0..<3000 {
            let ended = try await admin.query(
                "SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND query LIKE $2",
                [application, pattern])
            if !ended.isEmpty { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("no statement of \(application) ran")
    }

    @Test(
        "postgres: a connection the server ended reconnects; a statement is sent again only when it cannot have taken effect twice",
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
        let read = Task { try await store.pool.query("SELECT 1 AS one, pg_sleep(2)", retry: .idempotent) }
        try await Self.terminateRunning(application, admin: admin)
        #expect(try await read.value.first?["one"] == "1")
        // ...a statement that may have taken effect is not: one failed call, and the next call works.
        // (Prepared on both connections first: a session ended while a statement is being prepared
        // never ran it, and sends it again, which is right but not what this checks.)
        for _ in 0..<2 { _ = try await store.pool.query("SELECT 1 AS one, pg_sleep(2)", retry: .idempotent) }
        let write = Task { try await store.pool.query("SELECT 1 AS one, pg_sleep(2)") }
        try await Self.terminateRunning(application, admin: admin)
        #expect(await errorCode { _ = try await write.value } == "storage_failure")
        for _ in 0..<2 { #expect(try await store.credential(id: r.id)?.id == r.id) }
        await store.close()
    }

    @Test(
        "postgres: statements that arrive while the connection is busy go in one pipeline, each its own transaction with its own outcome",
        .enabled(if: postgresURL != nil))
    func postgresPipeline() async throws {
        let url = try #require(Self.postgresURL)
        let application = "pipeline_" + UUID().uuidString.prefix(8).lowercased()
        let store = try await Self.postgresStore(url, application: application, connections: 1)
        let r = try Self.record()
        try await store.insert(r)
        let spent = try Self.ceremony(binding: nil)
        try await store.insert(spent)
        // Prepared first, so that the statements below go straight into the pipeline.
        _ = try await store.credential(id: r.id)
        _ = try await store.consume(challenge: SecureRandom.bytes(32))
        let before = store.pool.pipelined.current

        // The connection is busy (a statement waits for a lock the test holds, as long as need be);
        // the statements queued behind it go together.
        let admin = try PostgresPool(url: url, size: 1)
        let busy = try await Self.blocked(store.pool, "SELECT 1 AS one, pg_advisory_xact_lock(7301)", application: application, admin: admin)
        let fresh = try Self.ceremony(binding: nil)
        async let reads = withThrowingTaskGroup(of: [UInt8]?.self) { group in
            for _ in 0..<8 { group.addTask { try await store.credential(id: r.id)?.id } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        async let duplicate = errorCode { try await store.insert(r) }
        async let consumed = store.consume(challenge: spent.challenge)
        async let consumedAgain = store.consume(challenge: spent.challenge)
        async let inserted: Void = store.insert(fresh)
        try await Self.waitUntilWaiting(store.pool, 12)
        _ = try await admin.query("COMMIT")
        #expect(try await busy.value.first?["one"] == "1")
        #expect(try await reads == Array(repeating: r.id, count: 8))
        // A failed statement fails alone: the others in its pipeline ran and committed.
        #expect(await duplicate == "credential_already_registered")
        let consumptions = [try await consumed, try await consumedAgain].compactMap { $0?.challenge }
        #expect(consumptions == [spent.challenge], "the challenge consumed exactly once")
        try await inserted
        #expect(try await store.pending(challenge: fresh.challenge)?.challenge == fresh.challenge)
        let pipelined = store.pool.pipelined.current - before
        #expect(pipelined >= 12, "\(pipelined) statements went in a pipeline")

        // The connection ends while a pipeline runs: what may have run is not sent again unless
        // it is safe to repeat, what cannot have run is; and the next statements work.
        // In this order, queued behind a busy connection: a long read, a consumption, a read.
        let blocker = try await Self.blocked(
            store.pool, "SELECT 2 AS two, pg_advisory_xact_lock(7301)", application: application, admin: admin, retry: .idempotent)
        let sleeper = Task { try await store.pool.query("SELECT 1 AS one, pg_sleep(2)", retry: .idempotent) }
        try await Self.waitUntilWaiting(store.pool, 1)
        let write = Task { await errorCode { _ = try await store.consume(challenge: fresh.challenge) } }
        try await Self.waitUntilWaiting(store.pool, 2)
        let read = Task { try await store.credential(id: r.id) }
        try await Self.waitUntilWaiting(store.pool, 3)
        _ = try await admin.query("COMMIT")
        try await Self.terminateRunning(application, admin: admin, matching: "%pg_sleep(2)%")
        #expect(try await blocker.value.first?["two"] == "2")
        #expect(try await sleeper.value.first?["one"] == "1", "a read is sent again")
        #expect(try await read.value?.id == r.id)
        #expect(await write.value == "storage_failure", "a consumption that may have run is not sent again")
        #expect(try await store.credential(id: r.id)?.id == r.id)

        // A close lets the statements already waiting run; later ones find the store closed.
        let last = try await Self.blocked(store.pool, "SELECT 1 AS one, pg_advisory_xact_lock(7301)", application: application, admin: admin)
        let waiting = (0..<4).map { _ in Task { try await store.credential(id: r.id)?.id } }
        try await Self.waitUntilWaiting(store.pool, 4)
        let closing = Task { await store.close() }
        try await Task.sleep(for: .milliseconds(200))  // the close queued behind the busy statement
        _ = try await admin.query("COMMIT")
        await closing.value
        #expect(try await last.value.first?["one"] == "1")
        for read in waiting { #expect(try await read.value == r.id) }
        #expect(await errorCode { _ = try await store.credential(id: r.id) } == "storage_failure")
    }

    /// Starts `sql` (which takes advisory lock 7301) on `pool` while `admin` holds that lock in an
    /// open transaction; returns once it waits for the lock. `admin` ends the wait with `COMMIT`.
    static func blocked(
        _ pool: PostgresPool, _ sql: String, application: String, admin: PostgresPool, retry: PostgresConnection.Retry = .ifNotSent
    ) async throws -> Task<[PostgresConnection.Row], any Error> {
        _ = try await admin.query("BEGIN")
        _ = try await admin.query("SELECT pg_advisory_xact_lock(7301)")
        let task = Task { try await pool.query(sql, retry: retry) }
        // Watched from another session: inside its transaction `admin` would see one snapshot of pg_stat_activity.
        let monitor = try PostgresPool(url: try #require(postgresURL), size: 1)
        defer { Task { await monitor.close() } }
        for _ in 0..<3000 {
            let waiting = try await monitor.query(
                "SELECT 1 AS x FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock(7301)%'",
                [application])
            if !waiting.isEmpty { return task }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("\(sql) never waited for the lock")
        return task
    }

    /// Whether a statement of `application` comes to wait for a lock within 3 s (watched through `monitor`).
    static func waitsForLock(_ application: String, monitor: PostgresPool) async throws -> Bool {
        for _ in 0..<300 {
            let waiting = try await monitor.query(
                "SELECT 1 AS x FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", [application])
            if !waiting.isEmpty { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    /// Waits until at least `count` statements wait for the pool's connections.
    static func waitUntilWaiting(_ pool: PostgresPool, _ count: Int) async throws {
        for _ in 0..<3000 {
            if pool.waiting >= count { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("\(pool.waiting) statements waited, not \(count)")
    }

    @Test("postgres: the stores' statements are prepared once per connection, again after a reconnect", .enabled(if: postgresURL != nil))
    func postgresPreparedStatements() async throws {
        let url = try #require(Self.postgresURL)
        let application = "prepared_" + UUID().uuidString.prefix(8).lowercased()
        let admin = try PostgresPool(url: url, size: 1)
        let store = try await Self.postgresStore(url, application: application, connections: 1)
        func preparedCount() async throws -> Int {
            Int(try await store.pool.query("SELECT COUNT(*) AS n FROM pg_prepared_statements").first?["n"] ?? "") ?? -1
        }
        func signIn() async throws {
            var r = try Self.record(count: 1)
            try await store.insert(r)
            let c = try Self.ceremony(binding: nil)
            try await store.insert(c)
            _ = try await store.pending(challenge: c.challenge)
            r.signCount = 2
            #expect(try await store.commitSignIn(consuming: c.challenge, updating: r, expectedSignCount: 1) == .committed)
        }
        try await signIn()
        let first = try await preparedCount()
        #expect(first >= 4, "\(first)")
        for _ in 0..<3 { try await signIn() }
        #expect(try await preparedCount() == first, "the same statements again prepare nothing new")
        // A new session (the server ended the old one) prepares again, and every statement works.
        try await Self.terminate(application, admin: admin)
        try await signIn()
        let second = try await preparedCount()
        #expect(second >= 5 && second <= first, "\(second): the sign-in's four statements and the count")
        try await signIn()
        #expect(try await preparedCount() == second)
        await store.close()
    }

    @Test(
        "postgres: a statement running longer than the statement timeout is cancelled, on new connections too",
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

    @Test(
        "postgres: an Apple identity unlinked while the account's last passkey is deleted leaves it a way in (the deletion waits, then refuses)",
        .enabled(if: postgresURL != nil))
    func postgresUnlinkBesideLastDeletion() async throws {
        // Noted by the fourth red-team pass: the unlink (Apple's consent-revoked) took no lock on
        // the account, so a deletion of the last passkey counted the identity being unlinked as the
        // way in that remained, and both committed. Here the unlink is held open in a transaction.
        let url = try #require(Self.postgresURL)
        let application = "unlink_" + UUID().uuidString.prefix(8).lowercased()
        let store = try await Self.postgresStore(url, application: application, connections: 1)
        let schema = try #require(try await store.pool.query("SELECT current_schema() AS s").first?["s"])
        let dana = UserEntity.new(name: "dana")
        let passkey = try Self.record(user: dana.id)
        try await store.create(dana, firstCredential: passkey)
        try await store.link(LinkedIdentity(provider: "apple", subject: "001.dana", userHandle: dana.id, createdAt: Date()))
        let revoking = try PostgresPool(url: url + "?options=-c%20search_path%3D\(schema)", size: 1)
        _ = try await revoking.query("BEGIN")
        #expect(try await revoking.query("SELECT subject FROM webauthn_unlink($1, $2)", ["apple", "001.dana"]).first?["subject"] == "001.dana")
        let deletion = Task { try await store.deleteCredential(id: passkey.id, ofAccount: dana.id) }
        let monitor = try PostgresPool(url: url, size: 1)
        #expect(try await Self.waitsForLock(application, monitor: monitor), "the deletion waits for the unlink's lock on the account")
        _ = try await revoking.query("COMMIT")
        #expect(try await deletion.value == .lastWayIn)
        #expect(try await store.credential(id: passkey.id) != nil, "the account keeps its passkey")
        // Unlinking an identity whose account is gone still removes it.
        try await store.link(LinkedIdentity(provider: "apple", subject: "002.dana", userHandle: dana.id, createdAt: Date()))
        _ = try await store.pool.query("DELETE FROM accounts")
        #expect(try await store.unlink(provider: "apple", subject: "002.dana")?.userHandle == dana.id)
        #expect(try await store.unlink(provider: "apple", subject: "002.dana") == nil)
        await monitor.close()
        await revoking.close()
        await store.close()
    }

    @Test(
        "postgres: ending an account's sessions waits for an addition in flight and ends the session it stores; the addition locks the account before its ceremony",
        .enabled(if: postgresURL != nil))
    func postgresSessionsEndAfterAddition() async throws {
        // Red team, sixth pass: sign-out everywhere deleted the sessions its statement could see;
        // an addition committing beside it kept the new session it stored.
        let url = try #require(Self.postgresURL)
        let application = "ending_" + UUID().uuidString.prefix(8).lowercased()
        let store = try await Self.postgresStore(url, application: application, connections: 2)
        let schema = try #require(try await store.pool.query("SELECT current_schema() AS s").first?["s"])
        let inSchema = url + "?options=-c%20search_path%3D\(schema)"
        let dana = UserEntity.new(name: "dana")
        try await store.create(dana, firstCredential: try Self.record(user: dana.id))
        func session() -> SignedInSession {
            SignedInSession(
                idHash: SecureRandom.bytes(32), userHandle: dana.id, createdAt: Date(), authenticatedAt: Date(), expiresAt: Date().addingTimeInterval(3600))
        }
        let old = session()
        try await store.insert(old)
        let inFlight = try PostgresPool(url: inSchema, size: 1), monitor = try PostgresPool(url: url, size: 1), probe = try PostgresPool(url: inSchema, size: 1)
        // An addition in flight holds the account's lock and has stored its new session.
        let fresh = session()
        _ = try await inFlight.query("BEGIN")
        _ = try await inFlight.query("SELECT webauthn_lock_account($1)", [PGText.bytea(dana.id)])
        _ = try await inFlight.query(
            "INSERT INTO sessions (id_hash, user_handle, created_at, authenticated_at, expires_at) VALUES ($1, $2, 0, 0, 4000000000)",
            [PGText.bytea(fresh.idHash), PGText.bytea(dana.id)])
        let ending = Task { try await store.deleteSessions(userHandle: dana.id) }
        #expect(try await Self.waitsForLock(application, monitor: monitor), "the sessions' ending waits for the addition")
        _ = try await inFlight.query("COMMIT")
        #expect(try await ending.value == 2)
        #expect(try await store.session(idHash: fresh.idHash) == nil, "the session the addition stored ended too")

        // An addition waiting for the account's lock holds no lock on its ceremony's row.
        let starter = session()
        try await store.insert(starter)
        let pending = try Self.ceremony(binding: starter.idHash)
        try await store.insert(pending)
        _ = try await inFlight.query("BEGIN")
        _ = try await inFlight.query("SELECT webauthn_lock_account($1)", [PGText.bytea(dana.id)])
        let commit = Task {
            try await store.commitRegistration(
                consuming: pending.challenge, addingTo: dana.id, limit: 10, credential: try Self.record(user: dana.id), signingIn: nil, replacing: nil)
        }
        #expect(try await Self.waitsForLock(application, monitor: monitor), "the addition waits for the account's lock")
        let free = try await probe.query("SELECT 1 AS x FROM challenges WHERE challenge = $1 FOR UPDATE NOWAIT", [PGText.bytea(pending.challenge)])
        #expect(free.count == 1, "the ceremony's row is not locked while the addition waits")
        _ = try await inFlight.query("COMMIT")
        #expect(try await commit.value, "the addition then commits")
        for pool in [inFlight, monitor, probe] { await pool.close() }
        await store.close()
    }

    @Test("postgres: a statement the server rolled back to end a deadlock is sent again, and takes effect once", .enabled(if: postgresURL != nil))
    func postgresDeadlockRetried() async throws {
        // Red team, seventh pass: concurrent sign-ins of one account deadlocked (13 in its log) and
        // answered 500. Here the deadlock is made on purpose: the store's statement locks row b then
        // waits for row a, which another session holds while it waits for b (each step waited for,
        // not timed: a CI run under load broke the first version). The store's session looks for
        // deadlocks first (deadlock_timeout 100 ms against 10 s), so its statement is rolled back.
        let url = try #require(Self.postgresURL)
        let tag = UUID().uuidString.prefix(8).lowercased()
        let store = try await Self.postgresStore(url, application: "deadlock_" + tag, connections: 1)
        let schema = try #require(try await store.pool.query("SELECT current_schema() AS s").first?["s"])
        _ = try await store.pool.query("SET deadlock_timeout = '100ms'")
        _ = try await store.pool.query("CREATE TABLE rows (id TEXT PRIMARY KEY, n INTEGER NOT NULL)")
        _ = try await store.pool.query("INSERT INTO rows VALUES ('a', 0), ('b', 0)")
        _ = try await store.pool.query(
            """
            CREATE FUNCTION b_then_a() RETURNS INTEGER LANGUAGE plpgsql AS $fn$
            BEGIN
                UPDATE rows SET n = n + 1 WHERE id = 'b';
                PERFORM pg_sleep(1);
                UPDATE rows SET n = n + 1 WHERE id = 'a';
                RETURN 1;
            END
            $fn$
            """)
        let other = try PostgresPool(url: url + "?options=-c%20search_path%3D\(schema)&application_name=deadlock_other_\(tag)", size: 1)
        let monitor = try PostgresPool(url: url, size: 1)
        _ = try await other.query("SET deadlock_timeout = '10s'")
        _ = try await other.query("BEGIN")
        _ = try await other.query("UPDATE rows SET n = n + 10 WHERE id = 'a'")
        let before = store.pool.deadlocks.current
        let statement = Task { try await store.pool.query("SELECT b_then_a() AS r") }
        // The store's statement holds b and sleeps (a second: time for the other to wait for b, in order).
        var sleeping = false
        for _ in 0..<500 where !sleeping {
            sleeping =
                !(try await monitor.query(
                    "SELECT 1 AS x FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'PgSleep'", ["deadlock_" + tag])).isEmpty
            if !sleeping { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(sleeping, "the store's statement took row b")
        let blocked = Task { try await other.query("UPDATE rows SET n = n + 10 WHERE id = 'b'") }
        #expect(try await Self.waitsForLock("deadlock_other_" + tag, monitor: monitor), "the other session waits for b")
        _ = try await blocked.value  // the store's statement was rolled back, which let this one through
        _ = try await other.query("COMMIT")
        #expect(try await statement.value.first?["r"] == "1", "sent again, it ran")
        #expect(store.pool.deadlocks.current > before, "a deadlock was met")
        let rows = try await store.pool.query("SELECT id, n FROM rows ORDER BY id")
        #expect(rows.map { $0["n"] } == ["11", "11"], "each statement took effect once")
        await monitor.close()
        await other.close()
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
}
