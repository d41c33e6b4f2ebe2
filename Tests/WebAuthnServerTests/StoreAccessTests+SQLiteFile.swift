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
            var message = ""
            do { _ = try await SQLiteStore.open(path: path) } catch let error as WebAuthnError {
                #expect(error.code == .storageFailure)
                message = error.message
            }
            #expect(message.contains("not an integer"), "\(value): \(message)")
            let again = try SQLiteDatabase(path: path)
            #expect(try await again.query("SELECT COUNT(*) AS n FROM schema_version").first?.column("n")?.integer == rows.map { $0 + 1 })
            try again.close()
        }
    }

    /// This server's database at `path`, closed, in rollback-journal mode (header bytes 18 and
    /// 19 set to 1, as in a copy made with `VACUUM INTO`); its bytes.
    static func rollbackJournalDatabase(at path: String) async throws -> Data {
        try await SQLiteStore.open(path: path).close()
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the WAL was not checkpointed on close")
        #expect(bytes[18] == 2 && bytes[19] == 2, "the store's own file is in WAL mode")
        bytes[18] = 1
        bytes[19] = 1
        try bytes.write(to: URL(fileURLWithPath: path))
        return bytes
    }
}
