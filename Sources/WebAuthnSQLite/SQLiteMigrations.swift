import SQLiteNIO
import WebAuthnCore

/// The schema, versioned in one place. A migration runs once, in order, in a
/// transaction with the version bump; never edit one that has shipped.
enum SQLiteMigrations {
    static let migrations: [(version: Int, statements: [String])] = [
        (1, [
            """
            CREATE TABLE accounts (
                name TEXT PRIMARY KEY,
                handle BLOB NOT NULL UNIQUE,
                display_name TEXT NOT NULL
            )
            """,
            """
            CREATE TABLE credentials (
                id BLOB PRIMARY KEY,
                user_handle BLOB NOT NULL,
                public_key BLOB NOT NULL,
                sign_count INTEGER NOT NULL,
                transports TEXT NOT NULL,
                uv_initialized INTEGER NOT NULL,
                backup_eligible INTEGER NOT NULL,
                backup_state INTEGER NOT NULL,
                aaguid BLOB NOT NULL,
                attestation_format TEXT NOT NULL,
                created_at REAL NOT NULL,
                last_used_at REAL
            )
            """,
            "CREATE INDEX credentials_by_user ON credentials (user_handle)",
            """
            CREATE TABLE challenges (
                challenge BLOB PRIMARY KEY,
                ceremony TEXT NOT NULL,
                expires_at REAL NOT NULL
            )
            """,
        ]),
    ]

    static func migrate(_ connection: SQLiteConnection) async throws {
        _ = try await connection.query("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        _ = try await connection.query("BEGIN IMMEDIATE")
        do {
            let current = Int(try await connection.query("SELECT MAX(version) AS v FROM schema_version").first?.column("v")?.integer ?? 0)
            for migration in migrations where migration.version > current {
                for statement in migration.statements { _ = try await connection.query(statement) }
                _ = try await connection.query("INSERT INTO schema_version (version) VALUES (?)", [.integer(SQLiteInt64(migration.version))])
            }
            _ = try await connection.query("COMMIT")
        } catch {
            _ = try? await connection.query("ROLLBACK")
            throw error
        }
    }
}
