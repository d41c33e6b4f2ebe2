public import Foundation
public import WebAuthnCore

// Signed-in sessions: the PostgreSQL store's SessionStore.
extension PostgresStore {

    /// Stores a session (replacing one with the same id hash), dropping the
    /// account's oldest beyond ``SignedInSession/maxPerUser`` in the same statement.
    public func insert(_ session: SignedInSession) async throws {
        // One statement: the new session, and the account's oldest beyond the limit dropped.
        let u = PGText.bytea(session.userHandle)
        _ = try await pool.query(
            """
            WITH inserted AS (
                INSERT INTO sessions (id_hash, user_handle, created_at, authenticated_at, expires_at) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (id_hash) DO UPDATE SET user_handle = EXCLUDED.user_handle, created_at = EXCLUDED.created_at,
                    authenticated_at = EXCLUDED.authenticated_at, expires_at = EXCLUDED.expires_at RETURNING id_hash
            )
            DELETE FROM sessions WHERE user_handle = $2 AND id_hash NOT IN (SELECT id_hash FROM inserted) AND id_hash NOT IN (
                SELECT id_hash FROM sessions WHERE user_handle = $2 ORDER BY created_at DESC LIMIT \(SignedInSession.maxPerUser - 1))
            """,
            [
                PGText.bytea(session.idHash), u, PGText.double(session.createdAt.timeIntervalSince1970),
                PGText.double(session.authenticatedAt.timeIntervalSince1970), PGText.double(session.expiresAt.timeIntervalSince1970),
            ],
            retry: .idempotent)
    }

    /// Ends `old` (when given) and stores `session`, dropping the account's oldest beyond
    /// ``SignedInSession/maxPerUser``: one statement, one round trip. The account's row is locked
    /// before any session's (the condition is evaluated before a row is locked), as the ending of
    /// its sessions locks it: a replacement in flight is waited for and its session ended too.
    public func replace(_ old: [UInt8]?, with session: SignedInSession) async throws {
        _ = try await pool.query(
            "WITH \(Self.sessionReplacement(first: 1, when: "webauthn_lock_account($2::bytea)")) SELECT 1 AS done", Self.sessionValues(session, replacing: old),
            retry: .idempotent)
    }

    /// Ends `old` and stores `session` only if `old` is still the same account's session: one
    /// statement, the account's row locked before `old`'s (as the ending of its sessions locks it),
    /// so an ending that came first leaves `old` gone and nothing stored, and one that comes after
    /// waits and ends `session` too. `old` is deleted first, so the per-account cap never drops it.
    public func replace(stored old: [UInt8], with session: SignedInSession) async throws -> Bool {
        let rows = try await pool.query(
            """
            WITH old_session AS (
                     DELETE FROM sessions WHERE id_hash = $6::bytea AND user_handle = $2::bytea AND webauthn_lock_account($2::bytea) RETURNING id_hash),
                 new_session AS (
                     INSERT INTO sessions (id_hash, user_handle, created_at, authenticated_at, expires_at)
                     SELECT $1::bytea, $2::bytea, $3::double precision, $4::double precision, $5::double precision WHERE EXISTS (SELECT 1 FROM old_session)
                     RETURNING id_hash),
                 trimmed_sessions AS (
                     DELETE FROM sessions WHERE user_handle = $2::bytea AND EXISTS (SELECT 1 FROM new_session) AND id_hash <> $6::bytea
                     AND id_hash NOT IN (
                         SELECT id_hash FROM sessions WHERE user_handle = $2::bytea AND id_hash <> $6::bytea
                         ORDER BY created_at DESC LIMIT \(SignedInSession.maxPerUser - 1)))
            SELECT COUNT(*) AS stored FROM new_session
            """, Self.sessionValues(session, replacing: old), retry: .idempotent)
        return rows.first?["stored"] == "1"
    }

    /// The session with this id hash, if stored (expired or not).
    public func session(idHash: [UInt8]) async throws -> SignedInSession? {
        guard
            let row = try await pool.query(
                "SELECT user_handle, created_at, authenticated_at, expires_at FROM sessions WHERE id_hash = $1", [PGText.bytea(idHash)], retry: .idempotent
            ).first
        else { return nil }
        guard let handle = PGText.bytes(row["user_handle"]), let created = row["created_at"].flatMap(Double.init),
            let authenticated = row["authenticated_at"].flatMap(Double.init), let expires = row["expires_at"].flatMap(Double.init)
        else {
            throw WebAuthnError(.storageFailure, "sessions row is unreadable")
        }
        return SignedInSession(
            idHash: idHash, userHandle: handle, createdAt: Date(timeIntervalSince1970: created),
            authenticatedAt: Date(timeIntervalSince1970: authenticated), expiresAt: Date(timeIntervalSince1970: expires))
    }

    /// Ends a session; nothing happens when there is none.
    public func delete(idHash: [UInt8]) async throws {
        _ = try await pool.query("DELETE FROM sessions WHERE id_hash = $1", [PGText.bytea(idHash)], retry: .idempotent)
    }

    /// Removes the sessions that expired before `date`; returns how many remain.
    public func sweepSessions(expiredBefore date: Date) async throws -> Int {
        _ = try await pool.query("DELETE FROM sessions WHERE expires_at < $1", [PGText.double(date.timeIntervalSince1970)], retry: .idempotent)
        return Int(try await pool.query("SELECT COUNT(*) AS n FROM sessions", retry: .idempotent).first?["n"] ?? "0") ?? 0
    }

    /// Ends every session of the account; returns how many.
    /// The account's row is locked first (`webauthn_end_sessions`, migration 12): an addition
    /// committing a new session for it is waited for, and that session ends too.
    public func deleteSessions(userHandle: [UInt8]) async throws -> Int {
        try await endSessions(userHandle, except: nil)
    }

    /// Ends every session of the account but `kept`, in one statement; returns how many. Locks as
    /// ``deleteSessions(userHandle:)`` does.
    public func deleteSessions(userHandle: [UInt8], except kept: [UInt8]) async throws -> Int {
        try await endSessions(userHandle, except: kept)
    }

    private func endSessions(_ userHandle: [UInt8], except kept: [UInt8]?) async throws -> Int {
        // Not sent again once it may have run: a repeat would count none.
        let rows = try await pool.query("SELECT webauthn_end_sessions($1, $2) AS n", [PGText.bytea(userHandle), kept.map(PGText.bytea)])
        return Int(rows.first?["n"] ?? "0") ?? 0
    }
}
