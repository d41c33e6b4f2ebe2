import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnTesting
import WebAuthnMetadata
@testable import WebAuthnPostgres
import WebAuthnSQLite
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The re-audit end to end: `webauthn serve` flags a stored credential once the metadata
/// service installs a BLOB that reports its authenticator compromised; the sign-in result
/// and the account page say so; `webauthn metadata audit` reports and clears it.
@Suite("Credential re-audit over HTTP and the CLI", .serialized)
struct AuditTests {
    let rpId = ServeProcess.rpId
    let origin = ServeProcess.origin

    @Test("a status change flags the stored credential; the sign-in says so; the CLI reports, and clears it when the status is lifted")
    func reaudit() async throws {
        let pki = MetadataServiceTests.pki
        let script = MetadataServiceTests.Script()
        script.set(.blob(try pki.blob(no: 4), etag: "\"v4\""))
        let standIn = try MetadataServiceTests.standIn(script)
        defer { standIn.stop() }
        let directory = MetadataServiceTests.temporaryDirectory()
        let root = directory + "-root.pem"
        try Data(pki.root.pem.utf8).write(to: URL(fileURLWithPath: root))
        let database = ServeProcess.temporaryDatabase()
        defer {
            for path in [directory, root, database] { try? FileManager.default.removeItem(atPath: path) }
        }
        let flags = ["--mds-url", standIn.url.absoluteString, "--mds-root", root, "--mds-cache", directory]
        var profile = SoftwareAuthenticator.Profile.securityKey
        profile.aaguid = MDSTestPKI.aaguid.bytes
        let key = SoftwareAuthenticator(profile: profile)

        // Registered while the model is certified.
        let first = try await ServeProcess(database: database, extra: flags)
        #expect(try await OperationsTests.await(first, "/readyz", status: 200).status == 200)
        let options = try await first.request("/attestation/options", ["username": "ivy"])
        let parts = try key.register(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(options.json["challenge"]!.stringValue!)!,
            userHandle: Base64URL.decode(options.json["user"]!["id"]!.stringValue!)!)
        let registered = try await first.request("/attestation/result", parts.json, cookie: options.cookie)
        #expect(registered.ok, "\(registered.errorMessage)")
        let cookie = registered.cookie
        let listed = try await first.request("/demo/credentials", cookie: cookie)
        #expect(listed.json["credentials"]?.arrayValue?.first?["flag"] == .null)
        first.stop()

        // The metadata service now reports the model compromised: the next server's audit flags it.
        script.set(.blob(try pki.blob(no: 5, status: "USER_KEY_REMOTE_COMPROMISE"), etag: "\"v5\""))
        let second = try await ServeProcess(database: database, extra: flags)
        defer { second.stop() }
        #expect(try await OperationsTests.await(second, "/readyz", status: 200).status == 200)
        var flag: JSONValue?
        for _ in 0..<200 {
            flag = try await second.request("/demo/credentials", cookie: cookie).json["credentials"]?.arrayValue?.first?["flag"]
            if let flag, flag != .null { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(flag?["status"]?.stringValue == "USER_KEY_REMOTE_COMPROMISE", "\(String(describing: flag))")
        #expect(flag?["reason"]?.stringValue?.contains("claimed") == true, "none attestation only claims its model")
        // It still signs in (the default policy), and the result says so.
        let request = try await second.request("/assertion/options", ["username": "ivy"])
        let assertion = try key.authenticate(
            rpId: rpId, origin: origin, challenge: Base64URL.decode(request.json["challenge"]!.stringValue!)!, credentialId: parts.id)
        let signedIn = try await second.request("/assertion/result", assertion.json, cookie: request.cookie)
        #expect(signedIn.ok && signedIn.json["flagged"]?.stringValue?.contains("USER_KEY_REMOTE_COMPROMISE") == true, "\(signedIn.json)")
        second.stop()

        // The CLI, against a BLOB whose report dated before the compromise's does not lift it
        // (red team, sixteenth pass: any listing cleared the flag), then one dated after it, which
        // does: a dry run reports the clearing, writes nothing.
        let older = directory + "-older.jwt"
        try Data(try pki.blob(no: 6, status: "FIDO_CERTIFIED_L2", effective: "2023-06-01")).write(to: URL(fileURLWithPath: older))
        defer { try? FileManager.default.removeItem(atPath: older) }
        let kept = try JSONValue.parse(
            Array(try await Self.run(["metadata", "audit", "--db", "sqlite:" + database, "--mds-blob", older, "--metadata-root", root]).utf8))
        #expect(kept["cleared"]?.arrayValue?.isEmpty == true && kept["keptFlagged"]?.intValue == 1, "\(kept)")
        let blob = directory + "-6.jwt"
        try Data(try pki.blob(no: 6, status: "FIDO_CERTIFIED_L2", effective: "2024-06-01")).write(to: URL(fileURLWithPath: blob))
        defer { try? FileManager.default.removeItem(atPath: blob) }
        let audit = ["metadata", "audit", "--db", "sqlite:" + database, "--mds-blob", blob, "--metadata-root", root]
        let dry = try await Self.run(audit + ["--dry-run"])
        let report = try JSONValue.parse(Array(dry.utf8))
        #expect(report["unreadable"]?.arrayValue?.isEmpty == true, "\(dry)")
        #expect(report["scanned"]?.intValue == 1 && report["cleared"]?.arrayValue?.first?["credentialId"]?.stringValue == Base64URL.encode(parts.id), "\(dry)")
        // Accounts appear as a hash, never as their user handle.
        #expect(!dry.contains(options.json["user"]!["id"]!.stringValue!))
        let again = try JSONValue.parse(Array(try await Self.run(audit).utf8))
        #expect(again["cleared"]?.arrayValue?.count == 1, "the dry run wrote the flag away")
        let last = try JSONValue.parse(Array(try await Self.run(audit).utf8))
        #expect(last["cleared"]?.arrayValue?.isEmpty == true && last["flagged"]?.arrayValue?.isEmpty == true)
    }

    /// The last note's finding: on PostgreSQL, `metadata audit --dry-run` ran the schema
    /// migrations, so an audit pointed at the wrong database (or schema) created this server's
    /// tables in it. It now opens only a database of this server at this build's schema.
    @Test("metadata audit on PostgreSQL opens only this server's schema: an empty one gets no tables, another version is refused")
    func auditPostgresCreatesNothing() async throws {
        guard let url = StoreContractTests.postgresURL else { return }
        let pki = MetadataServiceTests.pki
        let directory = MetadataServiceTests.temporaryDirectory()
        let root = directory + "-root.pem", blob = directory + "-4.jwt"
        defer { for path in [directory, root, blob] { try? FileManager.default.removeItem(atPath: path) } }
        try Data(pki.root.pem.utf8).write(to: URL(fileURLWithPath: root))
        try Data(try pki.blob(no: 4)).write(to: URL(fileURLWithPath: blob))
        let schema = "audit_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try PostgresPool(url: url, size: 1)
        defer { Task { await admin.close() } }
        _ = try await admin.query("CREATE SCHEMA \(schema)")
        let scoped = url + "?options=-c%20search_path%3D\(schema)"
        let tables = { try await admin.query("SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = $1", [schema]).first?["n"] }
        for extra in [["--dry-run"], []] {
            let refused = try JSONValue.parse(
                Array(try await Self.run(["metadata", "audit", "--db", scoped, "--mds-blob", blob, "--metadata-root", root] + extra).utf8))
            #expect(refused["status"]?.stringValue == "failed" && refused["error"]?.stringValue == "storage_failure", "\(refused)")
            #expect(try await tables() == "0", "the audit created tables \(extra)")
        }
        // This server's schema is audited; one at another version is refused, and left as it was.
        try await PostgresStore.open(url: scoped, connections: 1).close()
        let audited = try JSONValue.parse(Array(try await Self.run(["metadata", "audit", "--db", scoped, "--mds-blob", blob, "--metadata-root", root]).utf8))
        #expect(audited["scanned"]?.intValue == 0, "\(audited)")
        _ = try await admin.query("INSERT INTO \(schema).schema_version (version) VALUES (1000)")
        let newer = try JSONValue.parse(Array(try await Self.run(["metadata", "audit", "--db", scoped, "--mds-blob", blob, "--metadata-root", root]).utf8))
        #expect(newer["error"]?.stringValue == "storage_failure" && newer["message"]?.stringValue?.contains("1000") == true, "\(newer)")
    }

    /// Re-check of the eighteenth pass: a relative `file:app.db` was checked as that file and
    /// opened by SQLite as the URI of `app.db`: a named pipe there hung the audit, and another
    /// database there was audited in its place.
    @Test("metadata audit opens the file it checked, never a URI's", .timeLimit(.minutes(1)))
    func auditPathIsNoURI() async throws {
        let directory = try Self.metadataDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await SQLiteStore.open(path: directory + "/file:app.db").close()
        #expect(mkfifo(directory + "/app.db", 0o600) == 0)
        let process = Process()
        process.executableURL = ServeProcess.binary
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.arguments = ["metadata", "audit", "--db", "sqlite:file:app.db", "--mds-blob", "4.jwt", "--metadata-root", "root.pem", "--dry-run"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while process.isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let hung = process.isRunning
        if hung { process.terminate() }
        process.waitUntilExit()
        #expect(!hung, "the audit opened the named pipe")
        let report = try? JSONValue.parse(Array(out.fileHandleForReading.readDataToEndOfFile()))
        #expect(report?["scanned"]?.intValue == 0, "\(String(describing: report))")
    }

    /// The last note's finding: `--dry-run` opened the SQLite database read-write, so a file in
    /// rollback-journal mode (a copy made with `VACUUM INTO`) was switched to WAL.
    @Test("metadata audit --dry-run changes nothing in the SQLite file, not even its journal mode")
    func dryRunChangesNothing() async throws {
        let directory = try Self.metadataDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = directory + "/copy.db"
        let bytes = try await StoreAccessTests.rollbackJournalDatabase(at: database)
        let out = try await Self.run([
            "metadata", "audit", "--db", "sqlite:" + database, "--mds-blob", directory + "/4.jwt", "--metadata-root", directory + "/root.pem", "--dry-run",
        ])
        #expect((try? JSONValue.parse(Array(out.utf8)))?["scanned"]?.intValue == 0, "\(out)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == bytes, "the dry run changed the file")
    }

    /// A new directory holding the test PKI's root (`root.pem`) and a BLOB that verifies under
    /// it (`4.jwt`).
    static func metadataDirectory() throws -> String {
        let pki = MetadataServiceTests.pki
        let directory = MetadataServiceTests.temporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(pki.root.pem.utf8).write(to: URL(fileURLWithPath: directory + "/root.pem"))
        try Data(try pki.blob(no: 4)).write(to: URL(fileURLWithPath: directory + "/4.jwt"))
        return directory
    }

    /// Runs `webauthn` with `arguments`; its standard output.
    /// Waited for on a thread of its own, not on one of the cooperative pool's.
    static func run(_ arguments: [String]) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try runBlocking(arguments) }) }.start()
        }
    }

    static func runBlocking(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = ServeProcess.binary
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
