import Foundation
import Hummingbird
import Testing
import WebAuthnCore
import WebAuthnServer
import WebAuthnTesting
@testable import WebAuthnSQLite
@testable import WebAuthnPostgres
import _WebAuthnEncoding
import _WebAuthnCrypto

/// What one sign-in asks of its store, step by step, through the real routes (issue 13): on
/// SQLite one durable write per step, on PostgreSQL at most two round trips per step. Before
/// the combined reads and the session stored in the sign-in's own transaction, the result step
/// made three writes on SQLite and five round trips on PostgreSQL, and a sign-in by name made
/// three round trips for its options.
@Suite("Store accesses per ceremony step", .serialized)
struct StoreAccessTests {
    /// A store under test, with what it counts: (reads, writes) for SQLite, round trips for PostgreSQL.
    struct Counted: Sendable {
        let store: any CredentialStore & ChallengeStore & AccountStore & SessionStore
        let count: @Sendable () -> (reads: Int, writes: Int, roundTrips: Int)
        let close: @Sendable () async throws -> Void
    }

    typealias Accesses = (reads: Int, writes: Int, roundTrips: Int)

    static func difference(_ a: Accesses, _ b: Accesses) -> Accesses { (b.reads - a.reads, b.writes - a.writes, b.roundTrips - a.roundTrips) }

    static let kinds = ["sqlite"] + (StoreContractTests.postgresURL == nil ? [] : ["postgres"])

    static func open(_ kind: String) async throws -> Counted {
        if kind == "postgres", let url = StoreContractTests.postgresURL {
            // A fresh schema, as the contract tests do: the suites running meanwhile share the database.
            // One connection: each statement is prepared once, in the warm-up, whatever the round-robin.
            let schema = "access_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            _ = try await PostgresPool(url: url, size: 1).query("CREATE SCHEMA \(schema)")
            let store = try await PostgresStore.open(url: url + "?options=-c%20search_path%3D\(schema)", connections: 1)
            return Counted(store: store, count: { (0, 0, store.pool.roundTrips.current) }, close: { await store.close() })
        }
        let path = ServeProcess.temporaryDatabase()
        let store = try await SQLiteStore.open(path: path)
        return Counted(
            store: store,
            count: {
                let a = store.accesses.withLockedValue { $0 }
                return (a.reads, a.writes, 0)
            },
            close: {
                try await store.close()
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            })
    }

    @Test(
        "a sign-up's and a sign-in's steps: each one read (none for options without a name) and one write on SQLite, at most two round trips on PostgreSQL",
        arguments: kinds)
    func signInSteps(kind: String) async throws {
        let counted = try await Self.open(kind)
        let store = counted.store
        // A clock stopped at the test's start: the sweeps of expired ceremonies and sessions run once,
        // in the warm-up. Not a later time: the PostgreSQL database is shared with the suites running
        // meanwhile, and a sweep at a later "now" would remove their pending ceremonies and sessions.
        let rp = try RelyingParty(id: ServeProcess.rpId, origins: [ServeProcess.origin], clock: .fixed(Date()))
        let engine = WebAuthnEngine(relyingParty: rp, credentials: store, challenges: store, accounts: store)
        let routes = try WebAuthnRoutes(
            engine: engine, accounts: store, sessions: store, configuration: ServerConfiguration(secret: SecureRandom.bytes(32), rateLimit: nil))
        let router = Router(context: WebAuthnRequestContext.self)
        router.addRoutes(routes.routes())
        try await EmbeddingTests.serving({ running in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), onServerRunning: { await running($0.localAddress?.port ?? 0) })
        }) { port in
            let authenticator = SoftwareAuthenticator()
            let name = "alice-\(UUID().uuidString.prefix(8).lowercased())"
            /// A sign-up from a new browser (no cookie): the account with its first passkey.
            func signUp(_ name: String) async throws -> (RegistrationParts, String?, started: Accesses, finished: Accesses) {
                let before = counted.count()
                let options = try await ServeProcess.request(port: port, "/attestation/options", ["username": .string(name), "displayName": "Alice"])
                let middle = counted.count()
                let challenge = try #require(Base64URL.decode(options.json["challenge"]?.stringValue ?? ""))
                let user = try #require(Base64URL.decode(options.json["user"]?["id"]?.stringValue ?? ""))
                let parts = try authenticator.register(rpId: ServeProcess.rpId, origin: ServeProcess.origin, challenge: challenge, userHandle: user)
                let registered = try await ServeProcess.request(port: port, "/attestation/result", parts.json, cookie: options.cookie)
                let after = counted.count()
                #expect(registered.ok, "\(registered.errorMessage)")
                return (parts, registered.cookie, Self.difference(before, middle), Self.difference(middle, after))
            }
            let (parts, registeredCookie, _, _) = try await signUp(name)
            var cookie = registeredCookie
            // The statements are prepared now; a second sign-up shows what one costs.
            let (_, _, started, finished) = try await signUp(name + "-2")
            if kind == "postgres" {
                #expect(
                    started.roundTrips <= 2 && finished.roundTrips <= 2, "sign-up: options \(started.roundTrips), result \(finished.roundTrips) round trips")
            } else {
                #expect(started.writes == 1 && started.reads == 1, "sign-up options: \(started)")
                #expect(finished.writes == 1 && finished.reads == 1, "sign-up result: \(finished)")
            }

            /// One step: what it asked of the store.
            func step(_ path: String, _ body: JSONValue, cookie: String?) async throws -> (ServeProcess.Reply, (reads: Int, writes: Int, roundTrips: Int)) {
                let before = counted.count()
                let reply = try await ServeProcess.request(port: port, path, body, cookie: cookie)
                let after = counted.count()
                #expect(reply.ok, "\(path): \(reply.errorMessage)")
                return (reply, (after.reads - before.reads, after.writes - before.writes, after.roundTrips - before.roundTrips))
            }
            for round in 0..<3 {
                for byName in [true, false] {
                    let (options, started) = try await step("/assertion/options", byName ? ["username": .string(name)] : [:], cookie: cookie)
                    let challenge = try #require(Base64URL.decode(options.json["challenge"]?.stringValue ?? ""))
                    let assertion = try authenticator.authenticate(
                        rpId: ServeProcess.rpId, origin: ServeProcess.origin, challenge: challenge, credentialId: parts.id)
                    let (result, finished) = try await step("/assertion/result", assertion.json, cookie: options.cookie ?? cookie)
                    cookie = result.cookie ?? cookie
                    guard round > 0 else { continue }  // the warm-up prepares statements and runs the sweeps
                    let how = byName ? "by name" : "without a name"
                    if kind == "postgres" {
                        #expect(started.roundTrips <= 2, "options \(how): \(started.roundTrips) round trips")
                        #expect(finished.roundTrips <= 2, "result \(how): \(finished.roundTrips) round trips")
                    } else {
                        #expect(started.writes == 1 && started.reads == (byName ? 1 : 0), "options \(how): \(started)")
                        #expect(finished.writes == 1 && finished.reads == 1, "result \(how): \(finished)")
                    }
                }
            }
        }
        try await counted.close()
    }

    @Test(
        "§7.1 step 27 where the ceremony and the credential are read together: a registered credential ID is refused, and its challenge stays", arguments: kinds
    )
    func duplicateCredentialReadTogether(kind: String) async throws {
        let counted = try await Self.open(kind)
        let rp = try RelyingParty(id: ServeProcess.rpId, origins: [ServeProcess.origin])
        let engine = WebAuthnEngine(relyingParty: rp, credentials: counted.store, challenges: counted.store, accounts: counted.store)
        let authenticator = SoftwareAuthenticator()
        let user = UserEntity.new(name: "step27-\(UUID().uuidString.prefix(8).lowercased())")
        let options = try await engine.startRegistration(user: user, newAccount: true)
        let parts = try authenticator.register(rpId: ServeProcess.rpId, origin: ServeProcess.origin, challenge: options.challenge, userHandle: user.id)
        _ = try await engine.finishRegistration(json: parts.jsonBytes)
        let again = try await engine.startRegistration(user: user)
        var copy = parts
        copy.clientData.challenge = again.challenge
        let code: String?
        do {
            _ = try await engine.finishRegistration(json: copy.jsonBytes)
            code = nil
        } catch { code = error.code.rawValue }
        #expect(code == "credential_already_registered")
        #expect(try await counted.store.pending(challenge: again.challenge) != nil, "a refused registration leaves its challenge")
        try await counted.close()
    }

    /// The durability the documentation promises: GRDB's pool sets `synchronous=NORMAL` on its
    /// writer when it turns WAL on, after the connection's own set-up; a `COMMIT` then returned
    /// before its fsync, and an acknowledged sign-in or registration could be lost to a power
    /// cut. The store's writer must run `synchronous=FULL`. Its statement journals (one per
    /// unit of a group commit) stay in memory: on disk they cost a write per journaled page.
    @Test("the SQLite writer commits with synchronous=FULL, its statement journals in memory")
    func sqliteWriterDurability() async throws {
        let path = ServeProcess.temporaryDatabase()
        let store = try await SQLiteStore.open(path: path)
        let pragmas = try await store.connection.withWriter { writer in
            (
                try writer.query("PRAGMA synchronous").first?.column("synchronous")?.integer,
                try writer.query("PRAGMA temp_store").first?.column("temp_store")?.integer
            )
        }
        #expect(pragmas.0 == 2, "synchronous on the writer: 2 is FULL, 1 NORMAL")
        #expect(pragmas.1 == 2, "temp_store on the writer: 2 is MEMORY")
        try await store.close()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }
}

extension StoreAccessTests {
    /// Red team, sixteenth pass: one stored credential whose key no longer decoded failed the
    /// whole batch, so every audit failed and no credential was flagged.
    @Test("an audit skips a stored credential it cannot read, reports it by ID, and audits the others", arguments: kinds)
    func auditSkipsUnreadableRows(kind: String) async throws {
        let opened = try await Self.open(kind)
        let store = try #require(opened.store as? any CredentialAuditing)
        let aaguid = try #require(AAGUID(bytes: SecureRandom.bytes(16)))
        let records = try (1...4).map { n in
            CredentialRecord(
                id: [UInt8(n)] + SecureRandom.bytes(15), userHandle: Array("u\(n)".utf8),
                publicKey: try COSEKey(bytes: CBOREncoder.encode(try SigningKey.generate(.es256).coseKey())), signCount: 0, uvInitialized: true,
                backupEligible: false, backupState: false, aaguid: aaguid, attestationFormat: .none, createdAt: Date(timeIntervalSince1970: 1_800_000_000))
        }
        for record in records { try await store.insert(record) }
        let damaged = records[1].id
        // And a flag that cannot be read (red team, seventeenth pass: read as no flag).
        if let sqlite = store as? SQLiteStore {
            _ = try await sqlite.query("UPDATE credentials SET public_key = X'00' WHERE id = ?", [.blob(damaged)])
            _ = try await sqlite.query("UPDATE credentials SET flag = 'garbage' WHERE id = ?", [.blob(records[3].id)])
        } else if let postgres = store as? PostgresStore {
            _ = try await postgres.pool.query("UPDATE credentials SET public_key = '\\x00'::bytea WHERE id = $1", [PGText.bytea(damaged)])
            _ = try await postgres.pool.query("UPDATE credentials SET flag = 'garbage' WHERE id = $1", [PGText.bytea(records[3].id)])
        }
        #expect(try await store.credential(id: records[3].id)?.flag == .unreadable)
        var anchors = TrustAnchors.builtIn
        anchors.add([MetadataEntry(aaguid: aaguid, description: "revoked key", rootCertificates: [], statusReports: [StatusReport(status: .revoked)])])
        let report = try await CredentialAudit.run(store: store, anchors: anchors, at: Date(), batchSize: 2)
        #expect(report.scanned == 4 && report.flagged.map(\.credentialId) == [records[0].id, records[2].id, records[3].id], "\(report.json)")
        #expect(report.unreadable.map(\.credentialId) == [damaged] && report.json.contains(Base64URL.encode(damaged)), "\(report.json)")
        #expect(try await store.credential(id: records[2].id)?.flag?.status == .revoked)
        try await opened.close()
    }

    /// Red team, re-check of the seventeenth pass: another application's database with a
    /// `schema_version` of this build's version was opened by `metadata audit`, switched to WAL,
    /// and failed with a plain-text error.
    @Test("openExisting opens only this server's database: a foreign one with a schema_version is refused and not written", .timeLimit(.minutes(1)))
    func openExistingRefusesForeign() async throws {
        let path = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let latest = SQLiteMigrations.migrations.last?.version ?? 0
        let foreign = try SQLiteDatabase(path: path)
        _ = try await foreign.query("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        _ = try await foreign.query("INSERT INTO schema_version (version) VALUES (?)", [.integer(Int64(latest))])
        try foreign.close()
        #expect(await errorCode { _ = try await SQLiteStore.openExisting(path: path) } == "storage_failure")
        let again = try SQLiteDatabase(path: path)
        #expect(try await again.query("SELECT name FROM sqlite_master WHERE name = 'credentials'").isEmpty)
        try again.close()
        // Red team, eighteenth pass: another application's tables under this server's names (and
        // its schema_version at this build's number) passed, and the open switched the file to WAL.
        let named = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: named + suffix) } }
        let other = try SQLiteDatabase(path: named)
        _ = try await other.query("PRAGMA journal_mode=DELETE")
        for statement in [
            "CREATE TABLE schema_version (version INTEGER NOT NULL)", "INSERT INTO schema_version (version) VALUES (\(latest))",
            "CREATE TABLE accounts (id INTEGER PRIMARY KEY, email TEXT)", "CREATE TABLE credentials (id INTEGER PRIMARY KEY, secret TEXT)",
            "CREATE TABLE sessions (token TEXT PRIMARY KEY)", "CREATE TABLE challenges (c TEXT)",
        ] { _ = try await other.query(statement) }
        try other.close()
        let header = try Data(contentsOf: URL(fileURLWithPath: named))
        #expect(await errorCode { _ = try await SQLiteStore.openExisting(path: named) } == "storage_failure")
        #expect(try Data(contentsOf: URL(fileURLWithPath: named)) == header && header[18] == 1, "the file was rewritten")
        // Re-check: every table with this server's columns, but `credentials` a full-text index.
        let virtual = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: virtual + suffix) } }
        let index = try SQLiteDatabase(path: virtual)
        _ = try await index.query("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        _ = try await index.query("INSERT INTO schema_version (version) VALUES (\(latest))")
        for table in StoreSchema.tables {
            let columns = table.columns.joined(separator: ", ")
            _ = try await index.query(
                table.name == "credentials" ? "CREATE VIRTUAL TABLE credentials USING fts5(\(columns))" : "CREATE TABLE \(table.name) (\(columns))")
        }
        try index.close()
        #expect(await errorCode { _ = try await SQLiteStore.openExisting(path: virtual) } == "storage_failure")
        // A named pipe is refused at once (it waited for a writer for ever).
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("fifo-\(UUID().uuidString)").path
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { try? FileManager.default.removeItem(atPath: fifo) }
        #expect(await errorCode { _ = try await SQLiteStore.openExisting(path: fifo) } == "storage_failure")
        // This server's own database opens.
        let own = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: own + suffix) } }
        try await SQLiteStore.open(path: own).close()
        try await SQLiteStore.openExisting(path: own).close()
    }

    /// A build older than its database ran on it: the migrations skipped every version they knew
    /// and the server served on a schema whose newer rules it does not keep.
    @Test("a store refuses a database whose schema is newer than the build's, and changes nothing", arguments: kinds)
    func newerSchemaRefused(kind: String) async throws {
        if kind == "postgres", let url = StoreContractTests.postgresURL {
            let schema = "newer_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let admin = try PostgresPool(url: url, size: 1)
            _ = try await admin.query("CREATE SCHEMA \(schema)")
            let scoped = url + "?options=-c%20search_path%3D\(schema)"
            await (try await PostgresStore.open(url: scoped, connections: 1)).close()
            let newer = (PostgresMigrations.migrations.last?.version ?? 0) + 1
            _ = try await admin.query("INSERT INTO \(schema).schema_version (version) VALUES (\(newer))")
            #expect(await errorCode { _ = try await PostgresStore.open(url: scoped, connections: 1) } == "storage_failure")
            #expect(try await admin.query("SELECT COUNT(*) AS n FROM \(schema).schema_version").first?["n"] == String(newer))
            await admin.close()
            return
        }
        let path = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        try await SQLiteStore.open(path: path).close()
        let newer = (SQLiteMigrations.migrations.last?.version ?? 0) + 1
        let database = try SQLiteDatabase(path: path)
        _ = try await database.query("INSERT INTO schema_version (version) VALUES (?)", [.integer(Int64(newer))])
        try database.close()
        #expect(await errorCode { _ = try await SQLiteStore.open(path: path) } == "storage_failure")
        let again = try SQLiteDatabase(path: path)
        #expect(try await again.query("SELECT COUNT(*) AS n FROM schema_version").first?.column("n")?.integer == newer)
        try again.close()
    }

    /// Red team, eighteenth pass: the PostgreSQL probe read names alone. Views, tables split across
    /// the search path's schemas, and NULL or text versions passed; an audit then wrote a flag
    /// through an updatable view into another application's table.
    @Test("openExisting on PostgreSQL refuses views, tables split across schemas, and versions that are NULL or text")
    func openExistingPostgresStrict() async throws {
        guard let url = StoreContractTests.postgresURL else { return }
        let admin = try PostgresPool(url: url, size: 1)
        let tag = UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let real = "real_\(tag)", views = "views_\(tag)", partial = "partial_\(tag)", nulls = "nulls_\(tag)", text = "text_\(tag)"
        for schema in [real, views, partial, nulls, text] { _ = try await admin.query("CREATE SCHEMA \(schema)") }
        let scoped = { (path: String) in url + "?options=-c%20search_path%3D" + path.replacingOccurrences(of: ",", with: "%2C") }
        await (try await PostgresStore.open(url: scoped(real), connections: 1)).close()
        let latest = PostgresMigrations.migrations.last?.version ?? 0
        var setup = ["CREATE VIEW \(views).schema_version AS SELECT \(latest) AS version"]
        for table in StoreSchema.tables { setup.append("CREATE VIEW \(views).\(table.name) AS SELECT * FROM \(real).\(table.name)") }
        // Only schema_version and credentials here: the rest is found in the next schema.
        setup += [
            "CREATE TABLE \(partial).schema_version (version INTEGER NOT NULL)", "INSERT INTO \(partial).schema_version VALUES (\(latest))",
            "CREATE TABLE \(partial).credentials (LIKE \(real).credentials INCLUDING ALL)",
        ]
        for (schema, type, values) in [(nulls, "INTEGER", "(NULL), (\(latest))"), (text, "TEXT", "('\(latest)')")] {
            setup += ["CREATE TABLE \(schema).schema_version (version \(type))", "INSERT INTO \(schema).schema_version VALUES \(values)"]
            for table in StoreSchema.tables { setup.append("CREATE TABLE \(schema).\(table.name) (LIKE \(real).\(table.name) INCLUDING ALL)") }
        }
        // Re-check: a table with something attached that writes elsewhere (a child, a rule, a
        // trigger), each on a copy of this server's tables.
        let child = "child_\(tag)", rule = "rule_\(tag)", trigger = "trigger_\(tag)"
        for schema in [child, rule, trigger] {
            setup += [
                "CREATE SCHEMA \(schema)", "CREATE TABLE \(schema).schema_version (version INTEGER NOT NULL)",
                "INSERT INTO \(schema).schema_version VALUES (\(latest))",
            ]
            for table in StoreSchema.tables { setup.append("CREATE TABLE \(schema).\(table.name) (LIKE \(real).\(table.name) INCLUDING ALL)") }
        }
        setup += [
            "CREATE TABLE \(child).inheriting () INHERITS (\(child).credentials)",
            "CREATE RULE also AS ON UPDATE TO \(rule).credentials DO ALSO NOTIFY webauthn",
            "CREATE FUNCTION \(trigger).f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
            "CREATE TRIGGER t BEFORE UPDATE ON \(trigger).credentials FOR EACH ROW EXECUTE FUNCTION \(trigger).f()",
        ]
        for statement in setup { _ = try await admin.query(statement) }
        for path in [views, "\(partial),\(real)", nulls, text, child, rule, trigger] {
            #expect(await errorCode { _ = try await PostgresStore.openExisting(url: scoped(path), connections: 1) } == "storage_failure", "\(path)")
        }
        await (try await PostgresStore.openExisting(url: scoped(real), connections: 1)).close()
        await admin.close()
    }
}
