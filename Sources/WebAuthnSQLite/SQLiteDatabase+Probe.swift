import Foundation
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import GRDB
internal import GRDBSQLite

/// What an existing file holds, read before the store opens it read-write (red team, round 25).
extension SQLiteDatabase {
    /// What a database file holds, as read without writing to it (``probe(path:named:)``).
    enum Found: Equatable {
        /// Nothing yet: no file, an empty one, or a database without tables.
        case nothing
        /// A `schema_version` at `version` (all its rows integers), and the columns of each
        /// ordinary table (not virtual) by name.
        case store(version: Int, tables: [String: Set<String>])
    }

    /// What the file at `path` holds, read before anything opens it read-write, so that a file
    /// which is not this store's is refused unchanged (`named` is the path as the user gave it,
    /// for messages). Throws `storage_failure`:
    /// - for the file or a journal beside it (`-journal`, `-wal`, `-shm`) that is not a regular
    ///   file: SQLite opens a leftover journal, and a named pipe there hung every command (red
    ///   team, round 25; the database's own path, eighteenth pass);
    /// - for an empty file beside a journal or WAL that holds data: SQLite deletes either on
    ///   opening such a file;
    /// - for anything in the file but an empty `schema_version (version INTEGER)` without a
    ///   version (another application's tables, views, triggers or virtual tables), or a version
    ///   that is not an integer: another application's database, which `serve` took over or
    ///   switched to WAL before it failed;
    /// - with SQLite's own reason when the file cannot be read (busy, a journal to roll back).
    ///
    /// `recover` first rolls back a hot journal a crash left (SQLite does so on any read-write
    /// open; a read-only one cannot read such a file), as `serve` did before the probe existed.
    static func probe(path: String, named: String, recover: Bool) throws -> Found {
        let manager = FileManager.default
        for suffix in ["", "-journal", "-wal", "-shm"] where manager.fileExists(atPath: path + suffix) {
            // Not through links: SQLite opens the journals with O_NOFOLLOW.
            guard (try? manager.attributesOfItem(atPath: path + suffix)[.type] as? FileAttributeType) == .typeRegular else {
                throw WebAuthnError(.storageFailure, "\(named)\(suffix) is not a regular file, so no part of a database of this server; nothing was opened")
            }
        }
        guard manager.fileExists(atPath: path) else { return .nothing }
        func size(_ suffix: String) -> Int { ((try? manager.attributesOfItem(atPath: path + suffix)[.size]) as? NSNumber)?.intValue ?? 0 }
        if size("") == 0 {
            // A journal that would restore no page is what a first start that crashed leaves
            // (its header says the database had 0 pages); SQLite deletes it, and nothing is lost
            // (re-check of round 25: such a journal stopped every later start).
            for suffix in ["-journal", "-wal"] where size(suffix) > 0 && (suffix == "-wal" || restoresPages(journal: path + suffix)) {
                throw WebAuthnError(
                    .storageFailure,
                    "\(named) is empty beside a \(suffix.dropFirst()) of \(size(suffix)) bytes, which SQLite would delete: restore the database file; nothing was opened"
                )
            }
            return .nothing
        }
        do {
            return try read(path: path, named: named)
        } catch let error as DatabaseError where recover && error.extendedResultCode.rawValue == 776 {
            // SQLITE_READONLY_ROLLBACK: a hot journal, which a read-write connection rolls back
            // on its first read. Then the file is read again, as it was before the crash.
            var handle: OpaquePointer?
            defer { sqlite3_close_v2(handle) }
            SQLiteDatabase.configureProcess()
            guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK,
                sqlite3_exec(handle, "SELECT count(*) FROM sqlite_master", nil, nil, nil) == SQLITE_OK
            else {
                throw WebAuthnError(.storageFailure, "cannot roll back the journal of the SQLite database \(named): \(SQLiteError(connection: handle))")
            }
            do { return try read(path: path, named: named) } catch let error as WebAuthnError {
                throw WebAuthnError(error.code, error.message + " (a journal a crash left was rolled back first, as any SQLite client does)")
            } catch {
                throw WebAuthnError(.storageFailure, "cannot read the SQLite database \(named) after rolling back its journal: \(error)")
            }
        } catch let error as WebAuthnError {
            throw error
        } catch let error as DatabaseError where error.extendedResultCode.rawValue == 776 {
            throw WebAuthnError(
                .storageFailure, "the SQLite database \(named) has a journal to roll back (a crash): webauthn serve rolls it back; nothing was changed")
        } catch {
            throw WebAuthnError(.storageFailure, "cannot read the SQLite database \(named): \(error); nothing was changed")
        }
    }

    /// Whether the rollback journal at `path` would restore pages: its header is SQLite's (the
    /// magic number) and names a database of more than 0 pages before the transaction (bytes 16
    /// to 19, big-endian). One that does not is what a crashed first write leaves.
    static func restoresPages(journal path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return true }
        defer { try? handle.close() }
        let header = [UInt8]((try? handle.read(upToCount: 20)) ?? Data())
        guard header.count == 20, header.prefix(8).elementsEqual([0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]) else { return false }
        return header[16..<20].contains { $0 != 0 }
    }

    /// The probe's read, on a read-only connection.
    private static func read(path: String, named: String) throws -> Found {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        SQLiteDatabase.configureProcess()
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db -> Found in
            // Every object but SQLite's own (`sqlite_sequence`, `sqlite_autoindex_…`; compared
            // as a prefix, not with LIKE, whose `_` matches any character).
            let objects = try Row.fetchAll(
                db, sql: "SELECT type, name, sql FROM sqlite_master WHERE lower(substr(name, 1, 7)) <> 'sqlite_'"
            )
            .map { (type: $0["type"] as String? ?? "", name: $0["name"] as String? ?? "", sql: $0["sql"] as String? ?? "") }
            // Ordinary tables: a virtual table (FTS5, say) of the same name is another application's.
            var tables: [String: Set<String>] = [:]
            for object in objects where object.type == "table" && !object.sql.uppercased().hasPrefix("CREATE VIRTUAL TABLE") {
                tables[object.name] = Set(try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?)", arguments: [object.name]))
            }
            let versions = tables["schema_version"] == nil ? [] : try Row.fetchAll(db, sql: "SELECT typeof(version) AS t, version FROM schema_version")
            if let odd = versions.first(where: { ($0["t"] as String?) != "integer" }) {
                throw StoreSchema.versionNotInteger(odd["t"] as String? ?? "?", in: named)
            }
            guard let version = versions.compactMap({ $0["version"] as Int? }).max() else {
                // No version: nothing at all, or the empty version table of a start that failed
                // (this server's: one INTEGER column); else another application's objects.
                let declared = tables["schema_version"] == nil ? [] : try String.fetchAll(db, sql: "SELECT type FROM pragma_table_info('schema_version')")
                guard objects.allSatisfy({ $0.type == "table" && $0.name == "schema_version" }), declared.isEmpty || declared == ["INTEGER"] else {
                    let names = objects.map { "\($0.type) \($0.name.prefix(64))" }.sorted().prefix(5).joined(separator: ", ")
                    throw WebAuthnError(
                        .storageFailure,
                        "\(named) holds another application's objects (\(names)) and no schema version: not a database of this server; its content was not changed"
                    )
                }
                return .nothing
            }
            return .store(version: version, tables: tables)
        }
    }

    /// The tables that `statements` create, with their columns, as an empty database in memory
    /// holds them: what a database of this store has at every version (later versions only add).
    static func tables(createdBy statements: [String]) -> [String: Set<String>] {
        SQLiteDatabase.configureProcess()
        guard let queue = try? DatabaseQueue() else { return [:] }
        return
            (try? queue.write { db in
                for statement in statements { try db.execute(sql: statement) }
                var tables: [String: Set<String>] = [:]
                for name in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") {
                    tables[name] = Set(try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?)", arguments: [name]))
                }
                return tables
            }) ?? [:]
    }
}

/// What a statement costs, for the tests' budgets (issue 13).
extension SQLiteDatabase {
    /// The virtual-machine steps `sql` takes on the writer, its triggers' included, in a
    /// transaction rolled back after it (so it changes nothing).
    func steps(_ sql: String, _ binds: [SQLiteData] = []) async throws -> Int {
        do {
            return try await writer.writeWithoutTransaction { db in
                let statement = try db.cachedStatement(sql: sql).sqliteStatement
                try db.execute(sql: "BEGIN IMMEDIATE")
                defer { try? db.execute(sql: "ROLLBACK") }
                sqlite3_stmt_status(statement, SQLITE_STMTSTATUS_VM_STEP, 1)
                _ = try Self.run(connection: db.sqliteConnection, statement: statement, binds)
                return Int(sqlite3_stmt_status(statement, SQLITE_STMTSTATUS_VM_STEP, 1))
            }
        } catch let error as DatabaseError {
            throw SQLiteError(error)
        }
    }

    /// The lines of `sql`'s query plan (`EXPLAIN QUERY PLAN`), read on a reader.
    func plan(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [String] {
        try await read("EXPLAIN QUERY PLAN " + sql, binds).compactMap { $0.column("detail")?.string }
    }
}

/// Creates `path` as an empty file of mode 0600 (less the umask) if nothing is there. The database
/// holds the server secret and every session, and SQLite would create it 0644, so that any local
/// user could read them (operator review, helper 72). SQLite gives the WAL and shared-memory files
/// the database file's mode. An existing file is left as it is (opened without truncation, and
/// without blocking on a FIFO); a dangling symbolic link is followed, as SQLite would follow it
/// (red team, fortieth pass: with `O_EXCL` the link's target was left to SQLite, 0644).
func createDatabaseFileOwnerOnly(_ path: String) {
    let descriptor = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0o600)
    if descriptor >= 0 { close(descriptor) }
}
