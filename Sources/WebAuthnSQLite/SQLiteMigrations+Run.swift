internal import WebAuthnCore
internal import _WebAuthnEncoding

/// Running the migrations of ``SQLiteMigrations/migrations``: the version table, the work beyond
/// SQL (look-alike keys), one transaction.
extension SQLiteMigrations {
    /// The first migration whose accounts have a capitals key.
    static let capitalsKeyVersion = 11

    /// The migrations after whose statements every account's look-alike key is computed again.
    static let keyRecomputations: Set<Int> = [2, 10, 11]

    /// Work a migration needs beyond SQL, run in its transaction after its statements.
    static func afterStatements(of version: Int, _ connection: SQLiteConnectionHandle) throws {
        guard keyRecomputations.contains(version) else { return }
        // Look-alike keys for accounts made before version 2. Two old accounts
        // with one key keep distinct keys (the later one suffixed), so the
        // migration never fails; names made from now on cannot collide.
        // Capitals keys from their first migration on: cleared first, like the look-alike keys.
        let capitals = version >= capitalsKeyVersion
        if capitals { _ = try connection.query("UPDATE accounts SET capitals_key = NULL") }
        var seen: Set<String> = [], seenCapitals: Set<String> = []
        for row in try connection.query("SELECT rowid AS r, name FROM accounts ORDER BY rowid") {
            guard let name = row.column("name")?.string, let rowid = row.column("r")?.integer else { continue }
            var key = UserName.lookalikeKey(name)
            if !seen.insert(key).inserted { key += " legacy \(rowid)" }
            _ = try connection.query("UPDATE accounts SET name_key = ? WHERE rowid = ?", [.text(key), .integer(Int64(rowid))])
            guard capitals else { continue }
            var capitalsKey = UserName.capitalsKey(name)
            if !seenCapitals.insert(capitalsKey).inserted { capitalsKey += " legacy \(rowid)" }
            _ = try connection.query("UPDATE accounts SET capitals_key = ? WHERE rowid = ?", [.text(capitalsKey), .integer(Int64(rowid))])
        }
    }

    /// Runs the migrations not yet applied, in one transaction on the writer connection.
    static func migrate(_ database: SQLiteDatabase) async throws {
        try await database.withWriter { connection in
            _ = try connection.query("BEGIN IMMEDIATE")
            do {
                // In the transaction: a start that failed left an empty version table behind.
                _ = try connection.query("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                // A version that is not an integer (a `REAL` or text column made by hand) read as
                // none, and the first migration then failed on "table accounts already exists"
                // (red team, re-check of the eighteenth pass): it is refused for what it is.
                let odd = try connection.query("SELECT typeof(version) AS t FROM schema_version WHERE typeof(version) <> 'integer' LIMIT 1")
                if let type = odd.first?.column("t")?.string { throw StoreSchema.versionNotInteger(type) }
                let current = try connection.query("SELECT MAX(version) AS v FROM schema_version").first?.column("v")?.integer ?? 0
                // A build older than the schema does not know what the newer one keeps (its
                // constraints, its functions): it refuses rather than run on it.
                let latest = migrations.last?.version ?? 0
                guard current <= latest else { throw StoreSchema.newerThanBuild(current, latest: latest) }
                for migration in migrations where migration.version > current {
                    for statement in migration.statements { _ = try connection.query(statement) }
                    try afterStatements(of: migration.version, connection)
                    _ = try connection.query("INSERT INTO schema_version (version) VALUES (?)", [.integer(Int64(migration.version))])
                }
                _ = try connection.query("COMMIT")
            } catch {
                _ = try? connection.query("ROLLBACK")
                throw error
            }
        }
    }
}
