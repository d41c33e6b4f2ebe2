public import Foundation
public import ServiceLifecycle
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The store for several server instances behind a load balancer: the same
/// contract as `SQLiteStore`, on PostgreSQL through libpq. Every state change
/// is one atomic statement (`INSERT` on the primary key, `DELETE … RETURNING`,
/// `UPDATE … WHERE sign_count = $n RETURNING`), so the guarantees hold across
/// instances; migrations run under an advisory lock, once.
///
/// A `Service`: run in a `ServiceGroup` (before the services that use it,
/// which shut down first), it closes its connections on graceful shutdown.
public final class PostgresStore: CredentialStore, CredentialAuditing, ChallengeStore, SignInCommitting, AccountStore, LinkedIdentityStore, SessionStore,
    AccountWayInGuarding, Service
{
    let pool: PostgresPool

    /// Connects with a libpq URL (`postgres://user@host:port/db`) and migrates.
    ///
    /// Each connection gives up connecting after 5 seconds (unless the URL
    /// sets `connect_timeout`), keeps its TCP connection alive, and cancels a
    /// statement that runs longer than `statementTimeout` (`.zero`: no limit).
    /// A connection the server dropped reconnects on its next statement.
    ///
    /// `connections` is how many connections the store opens (default: one per processor, 2 to 8).
    /// Statements that arrive while a connection is busy go to the server together, in one
    /// pipeline, each still its own transaction; so a few connections carry a busy server, and
    /// more only add server processes and thread switches.
    public static func open(url: String, connections: Int = defaultConnections, statementTimeout: Duration = .seconds(10)) async throws(WebAuthnError)
        -> PostgresStore
    {
        try await connect(url: url, connections: connections, statementTimeout: statementTimeout) { pool in try await PostgresMigrations.migrate(pool) }
    }

    /// Any error of opening as a `WebAuthnError` (another type: `storage_failure`).
    static func storeError(_ error: any Error) -> WebAuthnError {
        (error as? WebAuthnError) ?? WebAuthnError(.storageFailure, "PostgreSQL: \(error)")
    }

    /// Connects only to a database that is already this store's, at this build's schema: for
    /// tools that must not create or migrate tables (`webauthn metadata audit`, whose `--dry-run`
    /// ran the migrations on PostgreSQL). Nothing is written by the check. Throws
    /// `storage_failure` when the search path has no `schema_version` and this store's tables,
    /// or holds another schema version.
    public static func openExisting(url: String, connections: Int = defaultConnections, statementTimeout: Duration = .seconds(10)) async throws(WebAuthnError)
        -> PostgresStore
    {
        try await connect(url: url, connections: connections, statementTimeout: statementTimeout) { pool in try await PostgresMigrations.requireCurrent(pool) }
    }

    /// A store on a new pool, once `check` has passed on it; the pool is closed when it fails.
    private static func connect(
        url: String, connections: Int, statementTimeout: Duration, _ check: (PostgresPool) async throws -> Void
    ) async throws(WebAuthnError) -> PostgresStore {
        do {
            let settings = PostgresSettings(statementTimeout: try PostgresSettings.milliseconds(statementTimeout))
            let store = PostgresStore(pool: try PostgresPool(url: url, size: connections, settings: settings))
            do {
                try await check(store.pool)
            } catch {
                await store.close()
                throw error
            }
            return store
        } catch {
            throw storeError(error)
        }
    }

    init(pool: PostgresPool) { self.pool = pool }

    /// One connection per active processor, at least 2 and at most 8.
    public static var defaultConnections: Int { min(8, max(2, ProcessInfo.processInfo.activeProcessorCount)) }

    /// Closes every connection (`PQfinish`) once the statements already
    /// running are done; later calls throw `storage_failure`. Closing again does nothing.
    public func close() async { await pool.close() }

    /// Waits for graceful shutdown (or cancellation), then closes the store.
    public func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            await close()
            throw error
        }
        await close()
    }

    // MARK: CredentialStore

    /// The record with this credential ID, if any.
    public func credential(id: [UInt8]) async throws -> CredentialRecord? {
        try await pool.query("SELECT \(CredentialColumn.list) FROM credentials WHERE id = $1", [PGText.bytea(id)], retry: .idempotent).first.map(Self.record)
    }

    /// The user's credentials, oldest first.
    public func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord] {
        try await pool.query(
            "SELECT \(CredentialColumn.list) FROM credentials WHERE user_handle = $1 ORDER BY created_at", [PGText.bytea(userHandle)], retry: .idempotent
        )
        .map(Self.record)
    }

    /// Stores a new record in one `INSERT`; throws `credential_already_registered`
    /// when the ID exists.
    public func insert(_ r: CredentialRecord) async throws {
        do {
            _ = try await pool.query(
                "INSERT INTO credentials (\(CredentialColumn.list)) VALUES (\(Self.parameters(1...CredentialColumn.allCases.count)))",
                r.values().map(PGText.value))
        } catch let error as PostgresConnection.Failure where error.isUniqueViolation {
            throw WebAuthnError(
                .credentialAlreadyRegistered, "credential \(Base64URL.encode(r.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
        }
    }

    /// `$1, $2, …`: the parameters numbered `range`.
    static func parameters(_ range: ClosedRange<Int>) -> String { range.map { "$\($0)" }.joined(separator: ", ") }

    /// Compare-and-set: writes the record's counter, backup state, UV-initialized flag
    /// and last use (nothing else) if the stored counter still equals
    /// `expectedSignCount`; returns whether it did.
    public func update(_ r: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool {
        !(try await pool.query(
            "UPDATE credentials SET sign_count = $1, backup_state = $2, uv_initialized = $3, last_used_at = $4 WHERE id = $5 AND sign_count = $6 RETURNING id",
            r.values([.signCount, .backupState, .uvInitialized, .lastUsedAt, .id]).map(PGText.value) + [String(expectedSignCount)])).isEmpty
    }

    /// Removes a credential; returns whether it existed.
    public func delete(id: [UInt8]) async throws -> Bool {
        !(try await pool.query("DELETE FROM credentials WHERE id = $1 RETURNING id", [PGText.bytea(id)])).isEmpty
    }

    /// Deletes `handle`'s credential `id` unless it is the account's last way in, through the
    /// `webauthn_delete_credential` function (migration 7): it locks the account's row, then counts
    /// with a snapshot taken after the lock, so that two deletions of the last two are serialized
    /// and the second sees one. (One statement alone counts with the snapshot it started with.)
    package func deleteCredential(id: [UInt8], ofAccount handle: [UInt8]) async throws -> CredentialDeletion {
        let rows = try await pool.query("SELECT webauthn_delete_credential($1, $2) AS outcome", [PGText.bytea(id), PGText.bytea(handle)])
        switch rows.first?["outcome"] {
        case "1": return .deleted
        case "-1": return .lastWayIn
        default: return .notFound
        }
    }

    /// Unlinks `handle`'s identity unless it is the account's last way to sign in
    /// (`webauthn_unlink_guarded`, migration 14: the account's row locked, then counted).
    package func unlinkIdentity(provider: String, subject: String, ofAccount handle: [UInt8]) async throws -> (CredentialDeletion, refreshToken: [UInt8]?) {
        let row = try await pool.query(
            "SELECT outcome, token FROM webauthn_unlink_guarded($1, $2, $3)", [provider, subject, PGText.bytea(handle)]
        ).first
        switch row?["outcome"] {
        case "1": return (.deleted, row?["token"].flatMap(PGText.bytes))
        case "-1": return (.lastWayIn, nil)
        default: return (.notFound, nil)
        }
    }

    /// Up to `limit` credentials whose IDs sort after `cursor` (bytea compares bytewise), in that order.
    public func credentials(after cursor: [UInt8]?, limit: Int) async throws -> [CredentialRecord] {
        try await pool.query(
            Self.credentialsAfterSQL,
            [PGText.bytea(cursor ?? []), String(max(0, min(limit, 100_000)))], retry: .idempotent
        ).map(Self.record)
    }

    /// The scan of ``credentials(after:limit:)`` and ``auditRows(after:limit:)``.
    static let credentialsAfterSQL = "SELECT \(CredentialColumn.list) FROM credentials WHERE id > $1 ORDER BY id LIMIT $2"

    /// ``credentials(after:limit:)`` with each row that cannot be read given by its ID.
    public func auditRows(after cursor: [UInt8]?, limit: Int) async throws -> [AuditRow] {
        try await pool.query(
            Self.credentialsAfterSQL,
            [PGText.bytea(cursor ?? []), String(max(0, min(limit, 100_000)))], retry: .idempotent
        ).map { row throws(WebAuthnError) in
            do throws(WebAuthnError) { return .record(try Self.record(row)) } catch {
                return .unreadable(id: try row.bytes(CredentialColumn.id.rawValue), reason: error.message)
            }
        }
    }

    /// Sets or clears the flag of credential `id`, in one `UPDATE`; returns whether it exists.
    public func setFlag(_ flag: CredentialFlag?, id: [UInt8]) async throws -> Bool {
        !(try await pool.query("UPDATE credentials SET flag = $1 WHERE id = $2 RETURNING id", [flag.map { $0.json.serialized() }, PGText.bytea(id)])).isEmpty
    }

    /// Sets or clears the owner's name of a credential of `userHandle`, in one `UPDATE`; returns whether it did.
    public func rename(id: [UInt8], ofUser userHandle: [UInt8], to name: String?) async throws -> Bool {
        !(try await pool.query(
            "UPDATE credentials SET name = $1 WHERE id = $2 AND user_handle = $3 RETURNING id", [name, PGText.bytea(id), PGText.bytea(userHandle)]))
            .isEmpty
    }

    /// A sign-in's writes in one statement and one round trip: the challenge consumed and,
    /// only if it was there, the counter compare-and-set (data-modifying CTEs, one transaction).
    /// A changed counter leaves the challenge consumed and the record unwritten.
    public func commitSignIn(consuming challenge: [UInt8], updating r: CredentialRecord, expectedSignCount: UInt32) async throws -> SignInCommit {
        try await commitSignIn(challenge, r, expectedSignCount, session: nil)
    }

    /// The same commit and, only if it committed, `oldSession` ended and `session` stored (with
    /// the account's oldest beyond ``SignedInSession/maxPerUser`` dropped): one statement, one
    /// transaction, one round trip. The account's row is locked first (`webauthn_lock_account`),
    /// as the ending of its sessions locks it (``deleteSessions(userHandle:)``): a sign-in or
    /// re-authentication in flight is waited for and its new session ended with the others (red
    /// team, twelfth pass: sign-out everywhere beside a re-authentication answered that it ended
    /// the sessions, and the re-authenticated session stayed signed in).
    public func commitSignIn(
        consuming challenge: [UInt8], updating r: CredentialRecord, expectedSignCount: UInt32, signingIn session: SignedInSession,
        replacing oldSession: [UInt8]?
    ) async throws -> SignInCommit {
        try await commitSignIn(challenge, r, expectedSignCount, session: (session, oldSession))
    }

    /// The sign-in commit, with the session replacement when `session` is given.
    private func commitSignIn(
        _ challenge: [UInt8], _ r: CredentialRecord, _ expectedSignCount: UInt32, session: (new: SignedInSession, old: [UInt8]?)?
    ) async throws -> SignInCommit {
        let replacement = session.map { _ in ",\n" + Self.sessionReplacement(first: 8, when: "EXISTS (SELECT 1 FROM updated)") } ?? ""
        // With a session: the account's lock before the ceremony's row (evaluated before the row is
        // locked), the order in which the sessions' ending takes them, so neither waits for a row the
        // other holds. $9 is the new session's account.
        let lock = session == nil ? "" : " AND webauthn_lock_account($9::bytea)"
        let rows = try await pool.query(
            """
            WITH consumed AS (DELETE FROM challenges WHERE challenge = $1\(lock) RETURNING challenge),
            updated AS (
                UPDATE credentials SET sign_count = $2, backup_state = $3, uv_initialized = $4, last_used_at = $5
                WHERE id = $6 AND sign_count = $7 AND EXISTS (SELECT 1 FROM consumed) RETURNING id
            )\(replacement)
            SELECT (SELECT COUNT(*) FROM consumed) AS consumed, (SELECT COUNT(*) FROM updated) AS updated
            """,
            [PGText.bytea(challenge)] + r.values([.signCount, .backupState, .uvInitialized, .lastUsedAt, .id]).map(PGText.value)
                + [String(expectedSignCount)] + (session.map { Self.sessionValues($0.new, replacing: $0.old) } ?? []))
        guard let row = rows.first, row["consumed"] == "1" else { return .challengeGone }
        return row["updated"] == "1" ? .committed : .counterChanged
    }

    /// The ceremony under `challenge` and the credential `credentialId`, in one round trip.
    public func pending(challenge: [UInt8], credentialId: [UInt8]) async throws -> (ceremony: PendingCeremony?, credential: CredentialRecord?) {
        guard
            let row = try await pool.query(
                """
                SELECT (SELECT ceremony FROM challenges WHERE challenge = $1) AS pending_ceremony, \(CredentialColumn.listOfC)
                FROM (SELECT 1) AS one LEFT JOIN credentials c ON c.id = $2
                """, [PGText.bytea(challenge), PGText.bytea(credentialId)], retry: .idempotent
            ).first
        else { return (nil, nil) }
        let ceremony = try row["pending_ceremony"].map { try PendingCeremony(serialized: Array($0.utf8)) }
        return (ceremony, row["id"] != nil ? try Self.record(row) : nil)
    }

    /// Data-modifying CTEs (comma-separated, none after the last) that, when `condition` holds, end the session
    /// `$(first + 5)` and store the session `$first…$(first + 4)` (id hash, user, created, authenticated,
    /// expires), dropping the account's oldest beyond ``SignedInSession/maxPerUser``. Every
    /// sub-statement sees the table as it was, so the ended and the new session are left out of the count.
    static func sessionReplacement(first n: Int, when condition: String) -> String {
        """
        old_session AS (DELETE FROM sessions WHERE id_hash = $\(n + 5)::bytea AND \(condition)),
        new_session AS (
            INSERT INTO sessions (id_hash, user_handle, created_at, authenticated_at, expires_at)
            SELECT $\(n)::bytea, $\(n + 1)::bytea, $\(n + 2)::double precision, $\(n + 3)::double precision, $\(n + 4)::double precision WHERE \(condition)
            ON CONFLICT (id_hash) DO UPDATE SET user_handle = EXCLUDED.user_handle, created_at = EXCLUDED.created_at,
                authenticated_at = EXCLUDED.authenticated_at, expires_at = EXCLUDED.expires_at RETURNING id_hash
        ),
        trimmed_sessions AS (
            DELETE FROM sessions WHERE user_handle = $\(n + 1)::bytea AND \(condition) AND id_hash NOT IN (SELECT id_hash FROM new_session)
            AND id_hash IS DISTINCT FROM $\(n + 5)::bytea AND id_hash NOT IN (
                SELECT id_hash FROM sessions WHERE user_handle = $\(n + 1)::bytea AND id_hash IS DISTINCT FROM $\(n + 5)::bytea
                ORDER BY created_at DESC LIMIT \(SignedInSession.maxPerUser - 1))
        )
        """
    }

    /// The parameters of ``sessionReplacement(first:when:)``.
    static func sessionValues(_ session: SignedInSession, replacing old: [UInt8]?) -> [String?] {
        [
            PGText.bytea(session.idHash), PGText.bytea(session.userHandle), PGText.double(session.createdAt.timeIntervalSince1970),
            PGText.double(session.authenticatedAt.timeIntervalSince1970), PGText.double(session.expiresAt.timeIntervalSince1970),
            old.map(PGText.bytea),
        ]
    }

    static func record(_ row: PostgresConnection.Row) throws(WebAuthnError) -> CredentialRecord {
        try CredentialRecord(row: row)
    }

    // MARK: ChallengeStore

    /// Keeps a ceremony under its challenge (replacing one under the same challenge),
    /// dropping its binding's oldest beyond ``PendingCeremony/maxPerBinding`` in the same statement.
    ///
    /// A registration or authentication ceremony is committed without waiting for its WAL to
    /// reach the disk (`synchronous_commit` off for this transaction alone): a PostgreSQL crash
    /// may lose one written in the last moments, which only makes its user start again. Its
    /// consumption is a durable commit, which flushes the WAL up to it, so a consumed ceremony
    /// is never lost. Sign in with Apple's single-use values stay durable.
    public func insert(_ ceremony: PendingCeremony) async throws {
        let values: [String?] = [
            PGText.bytea(ceremony.challenge), ceremony.json.serialized(), PGText.double(ceremony.expiresAt.timeIntervalSince1970),
            ceremony.binding.map(PGText.bytea),
        ]
        let relaxed = ceremony.kind == .registration || ceremony.kind == .authentication
        let row =
            relaxed
            ? "SELECT $1::bytea, $2::text, $3::double precision, $4::bytea FROM (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed"
            : "VALUES ($1::bytea, $2::text, $3::double precision, $4::bytea)"
        guard ceremony.binding != nil else {
            _ = try await pool.query(
                """
                INSERT INTO challenges (challenge, ceremony, expires_at, binding) \(row)
                ON CONFLICT (challenge) DO UPDATE SET ceremony = EXCLUDED.ceremony, expires_at = EXCLUDED.expires_at
                """, values, retry: .idempotent)
            return
        }
        // One statement: the insert, and the binding's oldest ceremonies beyond the limit dropped
        // (the DELETE sees the table before the INSERT, so it keeps one fewer).
        _ = try await pool.query(
            """
            WITH inserted AS (
                INSERT INTO challenges (challenge, ceremony, expires_at, binding) \(row)
                ON CONFLICT (challenge) DO UPDATE SET ceremony = EXCLUDED.ceremony, expires_at = EXCLUDED.expires_at RETURNING challenge
            )
            DELETE FROM challenges WHERE binding = $4 AND challenge NOT IN (SELECT challenge FROM inserted) AND challenge NOT IN (
                SELECT challenge FROM challenges WHERE binding = $4 ORDER BY expires_at DESC LIMIT \(PendingCeremony.maxPerBinding - 1))
            """, values, retry: .idempotent)
    }

    /// The ceremony under `challenge`, without removing it.
    public func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await pool.query("SELECT ceremony FROM challenges WHERE challenge = $1", [PGText.bytea(challenge)], retry: .idempotent).first.map(Self.ceremony)
    }

    /// Removes and returns the ceremony under `challenge` in one `DELETE … RETURNING`:
    /// of two concurrent consumers exactly one gets it.
    public func consume(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await pool.query("DELETE FROM challenges WHERE challenge = $1 RETURNING ceremony", [PGText.bytea(challenge)]).first.map(Self.ceremony)
    }

    /// Removes the ceremonies that expired before `date`; returns how many remain.
    public func sweep(expiredBefore date: Date) async throws -> Int {
        _ = try await pool.query("DELETE FROM challenges WHERE expires_at < $1", [PGText.double(date.timeIntervalSince1970)], retry: .idempotent)
        return Int(try await pool.query("SELECT COUNT(*) AS n FROM challenges", retry: .idempotent).first?["n"] ?? "0") ?? 0
    }

    /// Removes up to `count` of the ceremonies that expire first (through the expiry index), in one statement.
    public func evictOldest(_ count: Int) async throws -> Int {
        let rows = try await pool.query(
            """
            WITH gone AS (DELETE FROM challenges WHERE challenge IN (SELECT challenge FROM challenges ORDER BY expires_at LIMIT $1) RETURNING 1)
            SELECT COUNT(*) AS n FROM gone
            """, [String(max(0, min(count, 10_000)))])
        return Int(rows.first?["n"] ?? "0") ?? 0
    }

    static func ceremony(_ row: PostgresConnection.Row) throws -> PendingCeremony {
        guard let text = row["ceremony"] else { throw WebAuthnError(.storageFailure, "challenges.ceremony is NULL") }
        return try PendingCeremony(serialized: Array(text.utf8))
    }
}
