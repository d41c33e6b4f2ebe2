public import Foundation
public import WebAuthnCore
internal import _WebAuthnEncoding

// The SQLite store's pending ceremonies and the result steps that consume them: a sign-in's or a
// registration's writes as one unit of the next group commit, and the ChallengeStore.
extension SQLiteStore {
    // MARK: Result steps

    /// A sign-in's writes in one statement (the `sign_in_commits` view's trigger): the
    /// challenge consumed and the counter compare-and-set, one commit. When a check fails
    /// the statement changes nothing; a changed counter then consumes the challenge alone.
    public func commitSignIn(consuming challenge: [UInt8], updating r: CredentialRecord, expectedSignCount: UInt32) async throws -> SignInCommit {
        try await commitSignIn(challenge, r, expectedSignCount, with: [])
    }

    /// The same commit and, in the same unit of the same transaction, `oldSession` ended and
    /// `session` stored: all of it, or (a check failed) none of it.
    public func commitSignIn(
        consuming challenge: [UInt8], updating r: CredentialRecord, expectedSignCount: UInt32, signingIn session: SignedInSession,
        replacing oldSession: [UInt8]?
    ) async throws -> SignInCommit {
        try await commitSignIn(challenge, r, expectedSignCount, with: Self.replacing(oldSession, with: session))
    }

    /// The sign-in commit, with `more` statements in its unit.
    private func commitSignIn(
        _ challenge: [UInt8], _ r: CredentialRecord, _ expectedSignCount: UInt32, with more: [SQLiteDatabase.Statement]
    ) async throws -> SignInCommit {
        let commit: SQLiteDatabase.Statement = (
            """
            INSERT INTO sign_in_commits (challenge, id, expected_sign_count, sign_count, backup_state, uv_initialized, last_used_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """,
            [.blob(challenge)] + r.values([.id]).map(SQLiteData.init) + [.integer(Int64(expectedSignCount))]
                + r.values([.signCount, .backupState, .uvInitialized, .lastUsedAt]).map(SQLiteData.init)
        )
        do {
            _ = try await write([commit] + more)
            return .committed
        } catch let error as SQLiteError where error.isTriggerAbort {
            // Which check failed: the challenge is gone, or the counter moved (then the challenge is spent all the same).
            return try await consume(challenge: challenge) == nil ? .challengeGone : .counterChanged
        }
    }

    /// The ceremony under `challenge` and the credential `credentialId`, in one read.
    public func pending(challenge: [UInt8], credentialId: [UInt8]) async throws -> (ceremony: PendingCeremony?, credential: CredentialRecord?) {
        guard let row = try await query(Self.pendingSQL, [.blob(challenge), .blob(credentialId)]).first else { return (nil, nil) }
        let ceremony = try row.column("pending_ceremony").flatMap(\.string).map { try PendingCeremony(serialized: Array($0.utf8)) }
        return (ceremony, row.column("id")?.isNull == false ? try Self.record(row) : nil)
    }

    /// A registration's writes as one unit of the next group commit: the challenge consumed
    /// (it must be there), the credential stored (with its new account), the session replaced.
    public func commitRegistration(
        consuming challenge: [UInt8], creating account: UserEntity?, credential r: CredentialRecord, signingIn session: SignedInSession?,
        replacing oldSession: [UInt8]?
    ) async throws -> Bool {
        let store = account.map { Self.creating($0, firstCredential: r) } ?? Self.inserting(r)
        let sessionStatements = session.map { Self.replacing(oldSession, with: $0) } ?? []
        do {
            _ = try await write(
                [("DELETE FROM challenges WHERE challenge = ? RETURNING challenge", [.blob(challenge)]), store] + sessionStatements, requiresFirstRow: true)
            return true
        } catch let error as SQLiteError where error.isFirstRowMissing {
            return false
        } catch let error as SQLiteError where error.isDuplicate {
            guard let account else { throw Self.alreadyRegistered(r) }
            throw try await duplicate(creating: account, credential: r)
        }
    }

    /// A registration's writes for a credential added to an existing account, as one unit: the
    /// credential's owner is read from `accounts` in the insert, and only while the account holds
    /// fewer than `limit` credentials. A deleted account, or one at its limit, leaves it NULL, which
    /// the NOT NULL constraint refuses, and the whole unit is backed out (`account_unknown` or
    /// `credential_limit_reached`). One writer at a time, for every process: a deletion or another
    /// registration is wholly before this unit or after it.
    public func commitRegistration(
        consuming challenge: [UInt8], addingTo account: [UInt8], limit: Int, credential r: CredentialRecord, signingIn session: SignedInSession?,
        replacing oldSession: [UInt8]?
    ) async throws -> Bool {
        guard r.userHandle == account else { throw WebAuthnError(.configurationInvalid, "the credential's user handle is not the account's") }
        let sessionStatements = session.map { Self.replacing(oldSession, with: $0) } ?? []
        do {
            _ = try await write(
                [
                    ("DELETE FROM challenges WHERE challenge = ? RETURNING challenge", [.blob(challenge)]),
                    (
                        Self.insertForAccountSQL,
                        [.blob(account), .blob(account), .integer(Int64(limit))] + r.values(Self.insertForAccountColumns).map(SQLiteData.init)
                    ),
                ] + sessionStatements, requiresFirstRow: true)
            return true
        } catch let error as SQLiteError where error.isFirstRowMissing {
            return false
        } catch let error as SQLiteError where error.isNotNull {
            guard try await self.account(handle: account) != nil else { throw accountDeleted }
            throw credentialLimit(held: try await credentials(forUser: account).count, limit: limit)
        } catch let error as SQLiteError where error.isDuplicate {
            throw Self.alreadyRegistered(r)
        }
    }

    /// The credential columns but the owner, in the order ``insertForAccountSQL`` binds them.
    static let insertForAccountColumns = CredentialColumn.allCases.filter { $0 != .userHandle }

    /// The credential insert whose owner is the account's handle as `accounts` has it now, while it
    /// holds fewer credentials than the limit (NULL when deleted or full). Binds the handle twice and
    /// the limit, then ``insertForAccountColumns``.
    static let insertForAccountSQL =
        "INSERT INTO credentials (user_handle, \(insertForAccountColumns.map(\.rawValue).joined(separator: ", "))) VALUES ("
        + "(SELECT handle FROM accounts WHERE handle = ? AND (SELECT COUNT(*) FROM credentials WHERE user_handle = ?) < ?), "
        + placeholders(insertForAccountColumns.count) + ")"

    // MARK: ChallengeStore

    /// Keeps a ceremony under its challenge (replacing one under the same challenge),
    /// dropping its binding's oldest beyond ``PendingCeremony/maxPerBinding`` in the same statement.
    /// Not synced to disk (a power loss can lose it, and its user starts again); consuming it is.
    public func insert(_ ceremony: PendingCeremony) async throws {
        // The challenges_per_binding trigger keeps a binding's newest ceremonies, in the same statement.
        _ = try await query(
            "INSERT OR REPLACE INTO challenges (challenge, ceremony, expires_at, binding) VALUES (?, ?, ?, ?)",
            [
                .blob(ceremony.challenge), .text(ceremony.json.serialized()), .float(ceremony.expiresAt.timeIntervalSince1970),
                ceremony.binding.map { .blob($0) } ?? .null,
            ], durable: false)
    }

    /// The ceremony under `challenge`, without removing it.
    public func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await query("SELECT ceremony FROM challenges WHERE challenge = ?", [.blob(challenge)]).first.map(Self.ceremony)
    }

    /// Removes and returns the ceremony under `challenge` in one `DELETE … RETURNING`:
    /// of two concurrent consumers exactly one gets it.
    public func consume(challenge: [UInt8]) async throws -> PendingCeremony? {
        try await query("DELETE FROM challenges WHERE challenge = ? RETURNING ceremony", [.blob(challenge)]).first.map(Self.ceremony)
    }

    /// Removes the ceremonies that expired before `date`; returns how many remain.
    public func sweep(expiredBefore date: Date) async throws -> Int {
        _ = try await query("DELETE FROM challenges WHERE expires_at < ?", [.float(date.timeIntervalSince1970)])
        return Int(try await query("SELECT COUNT(*) AS n FROM challenges").first?.column("n")?.integer ?? 0)
    }

    /// Removes up to `count` of the ceremonies that expire first (through the expiry index), in one statement.
    public func evictOldest(_ count: Int) async throws -> Int {
        try await query(
            "DELETE FROM challenges WHERE challenge IN (SELECT challenge FROM challenges ORDER BY expires_at LIMIT ?) RETURNING 1 AS x",
            [.integer(Int64(max(0, min(count, 10_000))))]
        ).count
    }

    static func ceremony(_ row: SQLiteRow) throws -> PendingCeremony {
        guard let text = row.column("ceremony")?.string else { throw WebAuthnError(.storageFailure, "challenges.ceremony is not text") }
        return try PendingCeremony(serialized: Array(text.utf8))
    }
}
