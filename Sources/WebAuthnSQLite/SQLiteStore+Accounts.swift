public import Foundation
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// Accounts, the server secret, signed-in sessions and linked identities: the SQLite store's
// AccountStore, SessionStore and LinkedIdentityStore (its credentials and challenges are in SQLiteStore.swift).

extension SQLiteStore {
    // MARK: AccountStore

    /// The account whose name has the same look-alike key as `name`, else the same capitals key, if any.
    public func account(named name: String) async throws -> UserEntity? {
        try await query("SELECT name, handle, display_name FROM accounts WHERE \(Self.accountNamedSQL)", Self.keys(of: name)).first.map(Self.account)
    }

    /// The account a name finds: its look-alike key's, else its capitals key's (``keys(of:)`` binds the two parameters).
    /// Two lookups through the two unique indexes, the second only when the first finds nothing:
    /// an `OR` with an `ORDER BY` would merge the indexes in a row set and sort in a temporary B-tree.
    static let accountNamedSQL =
        "rowid = COALESCE((SELECT rowid FROM accounts WHERE name_key = ?), (SELECT rowid FROM accounts WHERE capitals_key = ?))"

    /// The parameters of ``accountNamedSQL``.
    static func keys(of name: String) -> [SQLiteData] {
        [.text(UserName.lookalikeKey(name)), .text(UserName.capitalsKey(name))]
    }

    /// The account named `name` with its credentials, in one read when `credentials` is this store.
    public func account(named name: String, withCredentialsIn credentials: any CredentialStore) async throws -> (
        account: UserEntity, credentials: [CredentialRecord]
    )? {
        guard (credentials as AnyObject) === self else { return try await accountThenCredentials(named: name, in: credentials) }
        let rows = try await query(Self.accountWithCredentialsSQL, Self.keys(of: name))
        guard let first = rows.first else { return nil }
        guard let accountName = first.column("account_name")?.string, let handle = first.column("account_handle")?.bytes else {
            throw WebAuthnError(.storageFailure, "accounts row is unreadable")
        }
        let account = try UserEntity(id: handle, name: accountName, displayName: first.column("account_display_name")?.string)
        // Oldest first, sorted here: in the statement, a temporary B-tree for a handful of rows.
        let records = try rows.filter { $0.column("id")?.isNull == false }.map(Self.record)
        return (account, records.count < 2 ? records : records.sorted { $0.createdAt < $1.createdAt })
    }

    /// The account with this user handle, if any.
    public func account(handle: [UInt8]) async throws -> UserEntity? {
        try await query("SELECT name, handle, display_name FROM accounts WHERE handle = ?", [.blob(handle)]).first.map(Self.account)
    }

    /// Creates `user` with its first credential in one statement, both or neither.
    /// Throws `username_unavailable` when the name (or its look-alike key) or the
    /// handle is taken, `credential_already_registered` when the credential ID is.
    public func create(_ user: UserEntity, firstCredential r: CredentialRecord) async throws {
        let statement = Self.creating(user, firstCredential: r)
        do {
            _ = try await query(statement.sql, statement.binds)
        } catch let error as SQLiteError where error.isDuplicate {
            throw try await duplicate(creating: user, credential: r)
        }
    }

    /// The statement that creates `user` with its first credential (the new_accounts_insert
    /// trigger inserts both rows or neither).
    static func creating(_ user: UserEntity, firstCredential r: CredentialRecord) -> SQLiteDatabase.Statement {
        // The view's credential columns are the table's, the owner being the account's handle.
        let columns = CredentialColumn.allCases.filter { $0 != .userHandle }
        return (
            // (The view calls the credential's name `credential_name`: `name` is the account's.)
            "INSERT INTO new_accounts (name, name_key, capitals_key, handle, display_name, \(columns.map { $0 == .name ? "credential_name" : $0.rawValue }.joined(separator: ", "))) VALUES (\(placeholders(5 + columns.count)))",
            accountValues(user) + r.values(columns).map(SQLiteData.init)
        )
    }

    /// The error for a creation refused as a duplicate: the account when one has the name, key
    /// or handle (the trigger inserts the account first; accounts are never reused), else the credential.
    func duplicate(creating user: UserEntity, credential r: CredentialRecord) async throws -> WebAuthnError {
        let account = try await query(
            "SELECT 1 AS x FROM accounts WHERE name = ? OR name_key = ? OR capitals_key = ? OR handle = ? LIMIT 1",
            [.text(user.name), .text(UserName.lookalikeKey(user.name)), .text(UserName.capitalsKey(user.name)), .blob(user.id)])
        guard account.isEmpty else {
            return WebAuthnError(.usernameUnavailable, "an account named \(user.name.prefix(64)) (or a name that looks the same) exists")
        }
        return WebAuthnError(
            .credentialAlreadyRegistered, "credential \(Base64URL.encode(r.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
    }

    /// The columns name, name_key, capitals_key, handle and display_name of a new account.
    static func accountValues(_ user: UserEntity) -> [SQLiteData] {
        [.text(user.name), .text(UserName.lookalikeKey(user.name)), .text(UserName.capitalsKey(user.name)), .blob(user.id), .text(user.displayName)]
    }

    static func account(_ row: SQLiteRow) throws -> UserEntity {
        guard let name = row.column("name")?.string, let handle = row.column("handle")?.bytes else {
            throw WebAuthnError(.storageFailure, "accounts row is unreadable")
        }
        return try UserEntity(id: handle, name: name, displayName: row.column("display_name")?.string)
    }

    // MARK: Settings

    /// The server secret kept in the database: made once (32 random bytes) by
    /// the first process that asks, then the same for every process and
    /// restart that opens this database. For servers given no secret of their own.
    public func serverSecret() async throws -> [UInt8] {
        _ = try await query("INSERT OR IGNORE INTO settings (name, value) VALUES ('server_secret', ?)", [.blob(SecureRandom.secret(32))])
        guard let value = try await query("SELECT value FROM settings WHERE name = 'server_secret'").first?.column("value")?.bytes,
            value.count >= 32
        else { throw WebAuthnError(.storageFailure, "settings.server_secret is unreadable") }
        return value
    }

    // MARK: SessionStore

    /// Stores a session (replacing one with the same id hash), dropping the
    /// account's oldest beyond ``SignedInSession/maxPerUser`` in the same statement.
    public func insert(_ session: SignedInSession) async throws {
        // The sessions_per_user trigger keeps the account's newest sessions, in the same statement.
        let insert = Self.replacing(nil, with: session)[0]
        _ = try await query(insert.sql, insert.binds)
    }

    /// Ends `old` (when given) and stores `session`, in one atomic write.
    public func replace(_ old: [UInt8]?, with session: SignedInSession) async throws {
        _ = try await write(Self.replacing(old, with: session))
    }

    /// Ends `old` and stores `session` only if `old` is still the same account's session, in one
    /// unit under the one writer (`old` deleted first, so the per-account cap never drops it).
    public func replace(stored old: [UInt8], with session: SignedInSession) async throws -> Bool {
        let end: SQLiteDatabase.Statement = (
            "DELETE FROM sessions WHERE id_hash = ? AND user_handle = ? RETURNING id_hash", [.blob(old), .blob(session.userHandle)]
        )
        do {
            _ = try await write([end] + Self.replacing(nil, with: session), requiresFirstRow: true)
            return true
        } catch let error as SQLiteError where error.isFirstRowMissing {
            return false
        }
    }

    /// The statements that end `old` and store `session` (the sessions_per_user trigger keeps the account's newest).
    static func replacing(_ old: [UInt8]?, with session: SignedInSession) -> [SQLiteDatabase.Statement] {
        (old.map { [("DELETE FROM sessions WHERE id_hash = ?", [SQLiteData.blob($0)])] } ?? []) + [
            (
                "INSERT OR REPLACE INTO sessions (id_hash, user_handle, created_at, authenticated_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                [
                    .blob(session.idHash), .blob(session.userHandle), .float(session.createdAt.timeIntervalSince1970),
                    .float(session.authenticatedAt.timeIntervalSince1970), .float(session.expiresAt.timeIntervalSince1970),
                ]
            )
        ]
    }

    /// The session with this id hash, if stored (expired or not).
    public func session(idHash: [UInt8]) async throws -> SignedInSession? {
        guard
            let row = try await query(
                "SELECT id_hash, user_handle, created_at, authenticated_at, expires_at FROM sessions WHERE id_hash = ?", [.blob(idHash)]
            ).first
        else { return nil }
        guard let handle = row.column("user_handle")?.bytes, let created = row.column("created_at")?.double,
            let authenticated = row.column("authenticated_at")?.double, let expires = row.column("expires_at")?.double
        else {
            throw WebAuthnError(.storageFailure, "sessions row is unreadable")
        }
        return SignedInSession(
            idHash: idHash, userHandle: handle, createdAt: Date(timeIntervalSince1970: created),
            authenticatedAt: Date(timeIntervalSince1970: authenticated), expiresAt: Date(timeIntervalSince1970: expires))
    }

    /// Ends a session; nothing happens when there is none.
    public func delete(idHash: [UInt8]) async throws {
        _ = try await query("DELETE FROM sessions WHERE id_hash = ?", [.blob(idHash)])
    }

    /// Removes the sessions that expired before `date`; returns how many remain.
    public func sweepSessions(expiredBefore date: Date) async throws -> Int {
        _ = try await query("DELETE FROM sessions WHERE expires_at < ?", [.float(date.timeIntervalSince1970)])
        return Int(try await query("SELECT COUNT(*) AS n FROM sessions").first?.column("n")?.integer ?? 0)
    }

    /// Ends every session of the account; returns how many.
    public func deleteSessions(userHandle: [UInt8]) async throws -> Int {
        try await query("DELETE FROM sessions WHERE user_handle = ? RETURNING id_hash", [.blob(userHandle)]).count
    }

    /// Ends every session of the account but `kept`, in one statement; returns how many.
    public func deleteSessions(userHandle: [UInt8], except kept: [UInt8]) async throws -> Int {
        try await query("DELETE FROM sessions WHERE user_handle = ? AND id_hash <> ? RETURNING id_hash", [.blob(userHandle), .blob(kept)]).count
    }

    // MARK: Account deletion and linked identities

    /// Deletes the account with its credentials, linked identities and sessions
    /// in one statement; false when there is none.
    public func deleteAccount(handle: [UInt8]) async throws -> Bool {
        // The accounts_delete trigger removes its credentials, identities and sessions in this statement.
        !(try await query("DELETE FROM accounts WHERE handle = ? RETURNING handle", [.blob(handle)])).isEmpty
    }

    /// Deletes the account as ``deleteAccount(handle:)`` does; when `identities` is this store, the
    /// identities removed with it, read in the deletion's own unit (one writer: nothing is linked
    /// in between), else those `identities` held just before.
    public func deleteAccount(handle: [UInt8], reportingIdentitiesIn identities: any LinkedIdentityStore) async throws -> [LinkedIdentity]? {
        guard identities as AnyObject === self else {
            let linked = try await identities.identities(forUser: handle)
            return try await deleteAccount(handle: handle) ? linked : nil
        }
        let rows = try await write([
            (
                "DELETE FROM identities WHERE user_handle = ? AND EXISTS (SELECT 1 FROM accounts WHERE handle = ?) RETURNING \(Self.identityColumns)",
                [.blob(handle), .blob(handle)]
            ),
            ("DELETE FROM accounts WHERE handle = ? RETURNING handle", [.blob(handle)]),
        ])
        guard rows.count == 2, !rows[1].isEmpty else { return nil }
        return try rows[0].map(Self.identity).sorted { $0.createdAt < $1.createdAt }
    }

    /// Sets the account's display name, in one `UPDATE`; false when there is no such account.
    public func setDisplayName(_ displayName: String, handle: [UInt8]) async throws -> Bool {
        !(try await query("UPDATE accounts SET display_name = ? WHERE handle = ? RETURNING handle", [.text(displayName), .blob(handle)])).isEmpty
    }

    static let identityColumns =
        "provider, subject, user_handle, email, email_verified, is_private_email, email_enabled, email_changed_at, refresh_token, created_at, updated_at"

    /// The identity of `subject` at `provider`, if linked.
    public func identity(provider: String, subject: String) async throws -> LinkedIdentity? {
        try await query("SELECT \(Self.identityColumns) FROM identities WHERE provider = ? AND subject = ?", [.text(provider), .text(subject)])
            .first.map(Self.identity)
    }

    /// The account's linked identities, oldest first.
    public func identities(forUser userHandle: [UInt8]) async throws -> [LinkedIdentity] {
        try await query("SELECT \(Self.identityColumns) FROM identities WHERE user_handle = ? ORDER BY created_at", [.blob(userHandle)]).map(Self.identity)
    }

    /// Creates `user` with its first identity in one statement, both or neither.
    /// Throws `identity_invalid`, `username_unavailable` or `identity_already_linked`.
    public func create(_ user: UserEntity, firstIdentity i: LinkedIdentity) async throws {
        try i.validate()
        do {
            // One statement: the new_identity_accounts_insert trigger inserts both rows or neither.
            _ = try await query(
                """
                INSERT INTO new_identity_accounts (name, name_key, capitals_key, handle, display_name, provider, subject, email, email_verified,
                                                   is_private_email, email_enabled, email_changed_at, refresh_token, created_at, updated_at)
                VALUES (\(Self.placeholders(15)))
                """,
                Self.accountValues(user) + Self.identityValues(i))
        } catch let error as SQLiteError where error.isDuplicate {
            if try await identity(provider: i.provider, subject: i.subject) != nil { throw LinkedIdentity.alreadyLinked(i.provider) }
            throw WebAuthnError(.usernameUnavailable, "an account named \(user.name.prefix(64)) (or a name that looks the same) exists")
        }
    }

    /// Links an identity to its existing account. Throws `identity_invalid`,
    /// `account_unknown` or `identity_already_linked`.
    public func link(_ i: LinkedIdentity) async throws {
        try i.validate()
        let inserted: [SQLiteRow]
        do {
            inserted = try await query(
                """
                INSERT INTO identities (provider, subject, user_handle, email, email_verified, is_private_email, email_enabled, email_changed_at,
                                        refresh_token, created_at, updated_at)
                SELECT ?, ?, handle, ?, ?, ?, ?, ?, ?, ?, ? FROM accounts WHERE handle = ? RETURNING subject
                """,
                [.text(i.provider), .text(i.subject)] + Self.identityValues(i).dropFirst(2) + [.blob(i.userHandle)])
        } catch let error as SQLiteError where error.isDuplicate {
            throw LinkedIdentity.alreadyLinked(i.provider)
        }
        guard !inserted.isEmpty else { throw LinkedIdentity.unknownAccount() }
    }

    /// Replaces the identity's email fields, refresh token and `updatedAt`; false
    /// when it is not linked. Throws `identity_invalid`.
    public func update(_ i: LinkedIdentity) async throws -> Bool {
        try i.validate()
        return try await updateIdentity(i, condition: "", [])
    }

    /// Replaces the identity's email fields, refresh token and `updatedAt` while its stored refresh
    /// token is `expected`, in one statement; false when it is not linked or its token changed.
    /// Throws `identity_invalid`.
    public func update(_ i: LinkedIdentity, ifRefreshTokenIs expected: [UInt8]?) async throws -> Bool {
        try i.validate()
        return try await updateIdentity(i, condition: " AND refresh_token IS ?", [expected.map { .blob($0) } ?? .null])
    }

    private func updateIdentity(_ i: LinkedIdentity, condition: String, _ arguments: [SQLiteData]) async throws -> Bool {
        !(try await query(
            """
            UPDATE identities SET email = ?, email_verified = ?, is_private_email = ?, email_enabled = ?, email_changed_at = ?, refresh_token = ?,
                                  updated_at = ?
            WHERE provider = ? AND subject = ?\(condition) RETURNING subject
            """,
            Array(Self.identityValues(i)[2...7]) + [.float(i.updatedAt.timeIntervalSince1970), .text(i.provider), .text(i.subject)] + arguments))
            .isEmpty
    }

    /// Moves the link of `subject` to `newSubject` (same account, `updatedAt` set to
    /// `date`); false when `subject` is not linked. Throws `identity_invalid`, or
    /// `identity_already_linked` when `newSubject` is linked already.
    public func relink(provider: String, subject: String, to newSubject: String, at date: Date) async throws -> Bool {
        try LinkedIdentity(provider: provider, subject: newSubject, userHandle: [0], createdAt: date).validate()
        do {
            return
                !(try await query(
                    "UPDATE identities SET subject = ?, updated_at = ? WHERE provider = ? AND subject = ? RETURNING subject",
                    [.text(newSubject), .float(date.timeIntervalSince1970), .text(provider), .text(subject)])).isEmpty
        } catch let error as SQLiteError where error.isDuplicate {
            throw LinkedIdentity.alreadyLinked(provider)
        }
    }

    /// Removes the link and returns it; nil when it was not linked.
    public func unlink(provider: String, subject: String) async throws -> LinkedIdentity? {
        try await query("DELETE FROM identities WHERE provider = ? AND subject = ? RETURNING \(Self.identityColumns)", [.text(provider), .text(subject)])
            .first.map(Self.identity)
    }

    /// Removes the link while its stored refresh token is `expected`, in one statement, and returns
    /// it; nil when it is not linked or its token changed.
    public func unlink(provider: String, subject: String, ifRefreshTokenIs expected: [UInt8]?) async throws -> LinkedIdentity? {
        try await query(
            "DELETE FROM identities WHERE provider = ? AND subject = ? AND refresh_token IS ? RETURNING \(Self.identityColumns)",
            [.text(provider), .text(subject), expected.map { .blob($0) } ?? .null]
        ).first.map(Self.identity)
    }

    /// provider, subject, email, email_verified, is_private_email, email_enabled, email_changed_at, refresh_token, created_at,
    /// updated_at.
    static func identityValues(_ i: LinkedIdentity) -> [SQLiteData] {
        func bool(_ b: Bool?) -> SQLiteData { b.map { .integer($0 ? 1 : 0) } ?? .null }
        return [
            .text(i.provider), .text(i.subject), i.email.map { .text($0) } ?? .null, bool(i.emailVerified), bool(i.isPrivateEmail),
            bool(i.emailEnabled), i.emailChangedAt.map { .float($0.timeIntervalSince1970) } ?? .null, i.refreshToken.map { .blob($0) } ?? .null,
            .float(i.createdAt.timeIntervalSince1970), .float(i.updatedAt.timeIntervalSince1970),
        ]
    }

    static func identity(_ row: SQLiteRow) throws -> LinkedIdentity {
        // Matched, not converted: a REAL out of range must not trap.
        func bool(_ name: String) -> Bool? { if case .integer(let v) = row.column(name) { return v != 0 } else { return nil } }
        guard let provider = row.column("provider")?.string, let subject = row.column("subject")?.string,
            let handle = row.column("user_handle")?.bytes, let created = row.column("created_at")?.double,
            let updated = row.column("updated_at")?.double
        else {
            throw WebAuthnError(.storageFailure, "identities row is unreadable")
        }
        return LinkedIdentity(
            provider: provider, subject: subject, userHandle: handle, email: row.column("email")?.string,
            emailVerified: bool("email_verified"), isPrivateEmail: bool("is_private_email"), emailEnabled: bool("email_enabled"),
            emailChangedAt: row.column("email_changed_at")?.double.map(Date.init(timeIntervalSince1970:)), refreshToken: row.column("refresh_token")?.bytes,
            createdAt: Date(timeIntervalSince1970: created), updatedAt: Date(timeIntervalSince1970: updated))
    }
}
