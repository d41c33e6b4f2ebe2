public import Foundation
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// Linked identities: the PostgreSQL store's LinkedIdentityStore (accounts and their deletion in
// PostgresStore+Accounts.swift).
extension PostgresStore {
    static let identityColumns =
        "provider, subject, user_handle, email, email_verified, is_private_email, email_enabled, email_changed_at, refresh_token, created_at, updated_at"
    /// ``identityColumns``' places, empty (the account's marker row beside the identities removed).
    static let nullIdentityColumns =
        "NULL::text, NULL::text, NULL::bytea, NULL::text, NULL::boolean, NULL::boolean, NULL::boolean, NULL::double precision, NULL::bytea, "
        + "NULL::double precision, NULL::double precision"

    /// The identity of `subject` at `provider`, if linked.
    public func identity(provider: String, subject: String) async throws -> LinkedIdentity? {
        try await pool.query("SELECT \(Self.identityColumns) FROM identities WHERE provider = $1 AND subject = $2", [provider, subject], retry: .idempotent)
            .first.map(Self.identity)
    }

    /// The account's linked identities, oldest first.
    public func identities(forUser userHandle: [UInt8]) async throws -> [LinkedIdentity] {
        try await pool.query(
            "SELECT \(Self.identityColumns) FROM identities WHERE user_handle = $1 ORDER BY created_at", [PGText.bytea(userHandle)],
            retry: .idempotent
        ).map(Self.identity)
    }

    /// Creates `user` with its first identity in one statement, both or neither.
    /// Throws `identity_invalid`, `username_unavailable` or `identity_already_linked`.
    public func create(_ user: UserEntity, firstIdentity i: LinkedIdentity) async throws {
        try i.validate()
        do {
            _ = try await pool.query(
                """
                WITH account AS (
                    INSERT INTO accounts (name, name_key, capitals_key, handle, display_name) VALUES ($1, $2, $3, $4, $5) RETURNING handle
                )
                INSERT INTO identities (provider, subject, user_handle, email, email_verified, is_private_email, email_enabled, email_changed_at,
                                        refresh_token, created_at, updated_at)
                SELECT $6, $7, handle, $8, $9::boolean, $10::boolean, $11::boolean, $12::double precision, $13::bytea, $14, $15 FROM account
                """,
                Self.accountValues(user) + Self.identityValues(i))
        } catch let error as PostgresConnection.Failure where error.isUniqueViolation {
            if error.table == "identities" { throw LinkedIdentity.alreadyLinked(i.provider) }
            throw WebAuthnError(.usernameUnavailable, "an account named \(user.name.prefix(64)) (or a name that looks the same) exists")
        }
    }

    /// Links an identity to its existing account. Throws `identity_invalid`,
    /// `account_unknown` or `identity_already_linked`.
    ///
    /// The account is read under a share lock: a deletion under way is waited for and then leaves
    /// no row (`account_unknown`); a deletion that comes after waits for this statement, and its
    /// last statement removes the identity it committed (``deleteAccount(handle:)``). Red team,
    /// twelfth pass: read without the lock, an Apple ID linked beside the account's deletion
    /// outlived it, and signed in to the deleted account from then on.
    public func link(_ i: LinkedIdentity) async throws {
        try i.validate()
        let rows: [PostgresConnection.Row]
        do {
            rows = try await pool.query(
                """
                WITH owner AS (SELECT handle FROM accounts WHERE handle = $11 FOR SHARE)
                INSERT INTO identities (provider, subject, user_handle, email, email_verified, is_private_email, email_enabled, email_changed_at,
                                        refresh_token, created_at, updated_at)
                SELECT $1, $2, handle, $3, $4::boolean, $5::boolean, $6::boolean, $7::double precision, $8::bytea, $9, $10 FROM owner RETURNING subject
                """,
                Self.identityValues(i) + [PGText.bytea(i.userHandle)])
        } catch let error as PostgresConnection.Failure where error.isUniqueViolation {
            throw LinkedIdentity.alreadyLinked(i.provider)
        }
        guard !rows.isEmpty else { throw LinkedIdentity.unknownAccount() }
    }

    /// Replaces the identity's email fields, refresh token and `updatedAt`; false
    /// when it is not linked. Throws `identity_invalid`.
    public func update(_ i: LinkedIdentity) async throws -> Bool {
        try await updateIdentity(i, condition: "", [], retry: .idempotent)
    }

    /// Replaces the identity's email fields, refresh token and `updatedAt` while its stored refresh
    /// token is `expected`, in one statement (the row lock of the update orders two at once: the
    /// second sees the first's token and changes nothing); false when it is not linked or its token
    /// changed. Throws `identity_invalid`; not sent again once it may have run, as every
    /// compare-and-set.
    public func update(_ i: LinkedIdentity, ifRefreshTokenIs expected: [UInt8]?) async throws -> Bool {
        try await updateIdentity(i, condition: " AND refresh_token IS NOT DISTINCT FROM $10::bytea", [expected.map(PGText.bytea)], retry: .ifNotSent)
    }

    /// The identity's email fields, refresh token and `updatedAt` written where `condition` (more
    /// SQL, its parameters from `$10`) holds; whether a row was.
    private func updateIdentity(_ i: LinkedIdentity, condition: String, _ arguments: [String?], retry: PostgresConnection.Retry) async throws -> Bool {
        try i.validate()
        let v = Self.identityValues(i)
        return
            !(try await pool.query(
                """
                UPDATE identities SET email = $1, email_verified = $2::boolean, is_private_email = $3::boolean, email_enabled = $4::boolean,
                                      email_changed_at = $5::double precision, refresh_token = $6::bytea, updated_at = $7
                WHERE provider = $8 AND subject = $9\(condition) RETURNING subject
                """, Array(v[2...7]) + [v[9], i.provider, i.subject] + arguments, retry: retry)).isEmpty
    }

    /// Moves the link of `subject` to `newSubject` (same account, `updatedAt` set to
    /// `date`); false when `subject` is not linked. Throws `identity_invalid`, or
    /// `identity_already_linked` when `newSubject` is linked already.
    public func relink(provider: String, subject: String, to newSubject: String, at date: Date) async throws -> Bool {
        try LinkedIdentity(provider: provider, subject: newSubject, userHandle: [0], createdAt: date).validate()
        do {
            return
                !(try await pool.query(
                    // Not sent again once it may have run: a repeat would find the old subject gone and answer false.
                    "UPDATE identities SET subject = $1, updated_at = $2 WHERE provider = $3 AND subject = $4 RETURNING subject",
                    [newSubject, PGText.double(date.timeIntervalSince1970), provider, subject])).isEmpty
        } catch let error as PostgresConnection.Failure where error.isUniqueViolation {
            throw LinkedIdentity.alreadyLinked(provider)
        }
    }

    /// Removes the link and returns it; nil when it was not linked. The account's row is locked
    /// for share first (`webauthn_unlink`), so that the deletion of its last credential, which
    /// counts the account's identities after locking that row, cannot run beside it.
    public func unlink(provider: String, subject: String) async throws -> LinkedIdentity? {
        try await pool.query("SELECT \(Self.identityColumns) FROM webauthn_unlink($1, $2)", [provider, subject]).first.map(Self.identity)
    }

    /// Removes the link while its stored refresh token is `expected`, in one statement under the
    /// account's share lock (as ``unlink(provider:subject:)``), and returns it; nil when it is not
    /// linked or its token changed (an update committed first is waited for and then compared).
    public func unlink(provider: String, subject: String, ifRefreshTokenIs expected: [UInt8]?) async throws -> LinkedIdentity? {
        try await pool.query(
            """
            WITH owner AS (SELECT handle FROM accounts WHERE handle = (SELECT user_handle FROM identities WHERE provider = $1 AND subject = $2) FOR SHARE)
            DELETE FROM identities USING owner
            WHERE provider = $1 AND subject = $2 AND user_handle = owner.handle AND refresh_token IS NOT DISTINCT FROM $3::bytea
            RETURNING \(Self.identityColumns)
            """, [provider, subject, expected.map(PGText.bytea)]
        ).first.map(Self.identity)
    }

    /// provider, subject, email, email_verified, is_private_email, email_enabled, email_changed_at, refresh_token, created_at,
    /// updated_at, as text parameters.
    static func identityValues(_ i: LinkedIdentity) -> [String?] {
        [
            i.provider, i.subject, i.email, i.emailVerified.map(PGText.bool), i.isPrivateEmail.map(PGText.bool), i.emailEnabled.map(PGText.bool),
            i.emailChangedAt.map { PGText.double($0.timeIntervalSince1970) }, i.refreshToken.map(PGText.bytea),
            PGText.double(i.createdAt.timeIntervalSince1970), PGText.double(i.updatedAt.timeIntervalSince1970),
        ]
    }

    static func identity(_ row: PostgresConnection.Row) throws -> LinkedIdentity {
        func bool(_ name: String) -> Bool? { row[name].map { $0 == "t" || $0 == "true" } }
        guard let provider = row["provider"], let subject = row["subject"], let handle = PGText.bytes(row["user_handle"]),
            let created = row["created_at"].flatMap(Double.init), let updated = row["updated_at"].flatMap(Double.init)
        else {
            throw WebAuthnError(.storageFailure, "identities row is unreadable")
        }
        return LinkedIdentity(
            provider: provider, subject: subject, userHandle: handle, email: row["email"], emailVerified: bool("email_verified"),
            isPrivateEmail: bool("is_private_email"), emailEnabled: bool("email_enabled"),
            emailChangedAt: row["email_changed_at"].flatMap(Double.init).map(Date.init(timeIntervalSince1970:)),
            refreshToken: row["refresh_token"].flatMap(PGText.bytes),
            createdAt: Date(timeIntervalSince1970: created), updatedAt: Date(timeIntervalSince1970: updated))
    }
}
