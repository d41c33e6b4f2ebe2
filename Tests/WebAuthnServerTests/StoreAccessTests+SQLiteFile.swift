import Foundation
import Testing
import WebAuthnCore
import WebAuthnTesting
@testable import WebAuthnSQLite

/// The SQLite file as the tools find it: a dry run's read-only store, and a `schema_version`
/// that no build wrote.
extension StoreAccessTests {
    /// The last note's finding: `metadata audit --dry-run` opened the database read-write, and
    /// a file in rollback-journal mode (a copy made with `VACUUM INTO`) was switched to WAL.
    @Test("a read-only store reads, changes nothing in the file (not its journal mode), and fails every write")
    func readOnlyStoreChangesNothing() async throws {
        let path = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let bytes = try await Self.rollbackJournalDatabase(at: path)
        let store = try await SQLiteStore.openExisting(path: path, readOnly: true)
        #expect(try await store.credentials(forUser: [1, 2, 3]).isEmpty)
        let failure = await errorCode { _ = try await store.sweep(expiredBefore: Date()) }
        #expect(failure?.contains("readonly") == true, "a write on the read-only store: \(String(describing: failure))")
        try await store.close()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "the read-only store changed the file")
    }

    /// Operator review (helper 72): the database was created 0644, so any local user could read
    /// the server secret and the sessions in it (and in its WAL, which takes the file's mode).
    @Test("a new database file, its WAL and its shared memory are readable by their owner alone; an existing file keeps its mode")
    func newDatabaseOwnerOnly() async throws {
        let path = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        func mode(_ file: String) throws -> Int { try #require(FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) }
        let store = try await SQLiteStore.open(path: path)
        _ = try await store.serverSecret()
        for suffix in ["", "-wal", "-shm"] {
            let found = try mode(path + suffix)
            #expect(found & 0o077 == 0, "\(suffix): \(String(found, radix: 8))")
        }
        try await store.close()
        // An operator's own choice of mode is left alone.
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: path)
        try await SQLiteStore.open(path: path).close()
        #expect(try mode(path) == 0o640)
        // Red team, fortieth pass: a dangling link as the path left the new file to SQLite (0644).
        let target = ServeProcess.temporaryDatabase(), link = ServeProcess.temporaryDatabase()
        defer { for file in [target, target + "-wal", target + "-shm", link] { try? FileManager.default.removeItem(atPath: file) } }
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        try await SQLiteStore.open(path: link).close()
        let created = try mode(target)
        #expect(created & 0o077 == 0, "\(String(created, radix: 8))")
    }

    /// Red team, re-check of the eighteenth pass: a `schema_version` whose version is a REAL
    /// (a table made by hand) read as no version, and the first migration then failed on
    /// "table accounts already exists", which named the wrong problem.
    @Test("a schema_version that holds no integer is refused as such, and the file is left as it was")
    func versionNotIntegerRefused() async throws {
        // Neither converts to an integer in the INTEGER column (`"3"` would).
        for value in [SQLiteData.float(3.5), .text("three")] {
            let path = ServeProcess.temporaryDatabase()
            defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
            try await SQLiteStore.open(path: path).close()
            let database = try SQLiteDatabase(path: path)
            let rows = try await database.query("SELECT COUNT(*) AS n FROM schema_version").first?.column("n")?.integer
            _ = try await database.query("INSERT INTO schema_version (version) VALUES (?)", [value])
            try database.close()
            // Round 25: serve switched the file to WAL and gave it a table before it refused it.
            try await Self.expectRefusedUnchanged(path, saying: "not an integer", "\(value)")
            let again = try SQLiteDatabase(path: path)
            #expect(try await again.query("SELECT COUNT(*) AS n FROM schema_version").first?.column("n")?.integer == rows.map { $0 + 1 })
            try again.close()
        }
    }

    /// Switches the closed database at `path` to rollback-journal mode, then expects the store
    /// to refuse it with `storage_failure` saying `expected`, and the file's bytes unchanged.
    static func expectRefusedUnchanged(_ path: String, saying expected: String, _ what: String) async throws {
        let bytes = try rollbackJournalMode(path)
        var message = ""
        do { _ = try await SQLiteStore.open(path: path) } catch {
            #expect(error.code == .storageFailure)
            message = error.message
        }
        #expect(message.contains(expected), "\(what): \(message)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "\(what): the refused file was changed")
    }

    /// This server's database at `path`, closed, in rollback-journal mode (header bytes 18 and
    /// 19 set to 1, as in a copy made with `VACUUM INTO`); its bytes.
    static func rollbackJournalDatabase(at path: String) async throws -> Data {
        try await SQLiteStore.open(path: path).close()
        return try rollbackJournalMode(path)
    }

    /// The closed WAL database at `path` switched to rollback-journal mode; its bytes.
    static func rollbackJournalMode(_ path: String) throws -> Data {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the WAL was not checkpointed on close")
        #expect(bytes[18] == 2 && bytes[19] == 2, "the store's own file is in WAL mode")
        bytes[18] = 1
        bytes[19] = 1
        try bytes.write(to: URL(fileURLWithPath: path))
        return bytes
    }

    /// Red team, round 25: `serve` took over another application's database that had no
    /// `schema_version` (it got this server's tables and WAL), or failed on one with its own
    /// `accounts` with "table accounts already exists", after switching it to WAL.
    @Test("a store refuses another application's SQLite database before it writes to it")
    func foreignDatabaseUnchanged() async throws {
        let cases: [[String]] = [
            ["CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"],
            ["CREATE TABLE accounts (id INTEGER PRIMARY KEY, email TEXT)"],
            ["CREATE TABLE accounts (id INTEGER PRIMARY KEY)", "CREATE TABLE schema_version (version INTEGER)", "INSERT INTO schema_version VALUES (3)"],
            // Re-check of round 25: tables of this server's names but not its columns, with a
            // version (serve wrote its secret into the application's `settings`); only views, a
            // table whose name LIKE read as SQLite's own, a view named schema_version, and an
            // empty version table of another type (serve then refused its own database).
            [
                "CREATE TABLE accounts (id INTEGER)", "CREATE TABLE credentials (id INTEGER)", "CREATE TABLE challenges (id INTEGER)",
                "CREATE TABLE settings (name TEXT PRIMARY KEY, value BLOB NOT NULL)", "CREATE TABLE schema_version (version INTEGER)",
                "INSERT INTO schema_version VALUES (11)",
            ],
            ["CREATE VIEW report AS SELECT 1 AS one"], ["CREATE TABLE sqliteXcache (a)"], ["CREATE VIEW schema_version AS SELECT 11 AS version"],
            ["CREATE TABLE schema_version (version TEXT)"],
        ]
        for statements in cases {
            let path = ServeProcess.temporaryDatabase()
            defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
            let database = try SQLiteDatabase(path: path)
            for statement in statements { _ = try await database.query(statement) }
            try database.close()
            try await Self.expectRefusedUnchanged(path, saying: "another application", "\(statements)")
        }
        // A file with nothing in it yet (no tables, or only the empty version table a failed
        // start left) is a new database.
        let empty = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: empty + suffix) } }
        let database = try SQLiteDatabase(path: empty)
        _ = try await database.query("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        try database.close()
        try await SQLiteStore.open(path: empty).close()
        try await SQLiteStore.openExisting(path: empty).close()
    }

    /// Red team, round 25: SQLite opens a leftover `-journal` beside the database, and a named
    /// pipe there hung `serve` and the audit; an empty database file beside a WAL that held data
    /// lost the WAL to the dry run's probe; and every failure to read read as "not a database of
    /// this server".
    @Test("a store refuses journals that are not files and an empty file beside a WAL, unchanged", .timeLimit(.minutes(1)))
    func journalsBesideTheFile() async throws {
        let path = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        _ = try await Self.rollbackJournalDatabase(at: path)
        #expect(mkfifo(path + "-journal", 0o600) == 0)
        for open in [{ try await SQLiteStore.open(path: path).close() }, { try await SQLiteStore.openExisting(path: path, readOnly: true).close() }] {
            var message = ""
            do { try await open() } catch let error as WebAuthnError { message = error.message }
            #expect(message.contains("-journal is not a regular file"), "\(message)")
        }
        try FileManager.default.removeItem(atPath: path + "-journal")

        // The WAL, and (re-check of round 25) a rollback journal beside an empty file, whose
        // header says it restores a database of 3 pages.
        let magic: [UInt8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]
        func journalHeader(pages: UInt8) -> Data { Data(magic + [0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, pages] + [UInt8](repeating: 7, count: 4076)) }
        let journal = journalHeader(pages: 3)
        try Data().write(to: URL(fileURLWithPath: path))
        for suffix in ["-wal", "-journal"] {
            try journal.write(to: URL(fileURLWithPath: path + suffix))
            for open in [{ try await SQLiteStore.open(path: path).close() }, { try await SQLiteStore.openExisting(path: path, readOnly: true).close() }] {
                var message = ""
                do { try await open() } catch let error as WebAuthnError { message = error.message }
                #expect(message.contains("is empty beside a \(suffix.dropFirst())"), "\(message)")
                #expect((try? Data(contentsOf: URL(fileURLWithPath: path + suffix))) == journal, "\(suffix) was deleted or changed")
            }
            try FileManager.default.removeItem(atPath: path + suffix)
        }
        // A journal of a database of 0 pages is what a first start that crashed leaves: serve
        // starts (second re-check of round 25: it was refused at every start).
        try journalHeader(pages: 0).write(to: URL(fileURLWithPath: path + "-journal"))
        try await SQLiteStore.open(path: path).close()
        try await SQLiteStore.openExisting(path: path, readOnly: true).close()
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }

        // A file SQLite cannot read says so, rather than "not a database of this server".
        try Data(repeating: 0x5a, count: 8192).write(to: URL(fileURLWithPath: path))
        var message = ""
        do { try await SQLiteStore.openExisting(path: path, readOnly: true).close() } catch { message = error.message }
        #expect(message.contains("cannot read the SQLite database"), "\(message)")
    }

    /// Re-check of round 25: a hot journal (a crash in a transaction of a rollback-mode copy)
    /// made the read-only probe fail, so `serve` no longer started where it had rolled the
    /// journal back and started. The audit, which writes nothing, says what to do.
    @Test("serve rolls back a hot journal and opens the database; the audit refuses it with the reason")
    func hotJournalRecovered() async throws {
        let path = ServeProcess.temporaryDatabase()
        defer { for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        _ = try await Self.rollbackJournalDatabase(at: path)
        // A transaction that spilled pages into the file, and a process that died before COMMIT.
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = [
            "python3", "-c",
            """
            import os, sqlite3, sys
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            c.execute("PRAGMA cache_size=2")
            c.execute("BEGIN")
            for i in range(2000): c.execute("INSERT INTO settings (name, value) VALUES (?, randomblob(200))", ("junk%d" % i,))
            os._exit(0)
            """,
            path,
        ]
        try python.run()
        python.waitUntilExit()
        #expect(python.terminationStatus == 0)
        let size = ((try FileManager.default.attributesOfItem(atPath: path + "-journal")[.size]) as? NSNumber)?.intValue ?? 0
        #expect(size > 0, "no hot journal was left")
        var message = ""
        do { try await SQLiteStore.openExisting(path: path, readOnly: true).close() } catch { message = error.message }
        #expect(message.contains("journal to roll back"), "\(message)")
        let store = try await SQLiteStore.open(path: path)
        let junk = try await store.query("SELECT COUNT(*) AS n FROM settings WHERE name LIKE 'junk%'")
        #expect(junk.first?.column("n")?.integer == 0, "the crashed transaction's rows were kept")
        try await store.close()
    }
}
