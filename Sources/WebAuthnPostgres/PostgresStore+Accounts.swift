internal import Foundation
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// Accounts, the server secret and the deletion of an account with its linked identities: the PostgreSQL store's AccountStore
// (its identities are in PostgresStore+Identities.swift, its sessions in PostgresStore+Sessions.swift, its credentials and challenges in PostgresStore.swift).

extension PostgresStore {
    // MARK: AccountStore

    /// The account whose name has the same look-alike key as `name`, else the same capitals key, if any.
    public func account(named name: String) async throws -> UserEntity? {
        try await pool.query("SELECT name, handle, display_name FROM accounts WHERE \(Self.accountNamedSQL)", Self.keys(of: name), retry: .idempotent).first
            .map(Self.account)
    }

    /// The account a name finds: its look-alike key's ($1), else its capitals key's ($2).
    static let accountNamedSQL = "handle = (SELECT handle FROM accounts WHERE name_key = $1 OR capitals_key = $2 ORDER BY name_key = $1 DESC LIMIT 1)"

    /// The parameters of ``accountNamedSQL``.
    static func keys(of name: String) -> [String?] {
        [UserName.lookalikeKey(name), UserName.capitalsKey(name)]
    }

    /// The account named `name` with its credentials, in one round trip when `credentials` is this store.
    public func account(named name: String, withCredentialsIn credentials: any CredentialStore) async throws -> (
        account: UserEntity, credentials: [CredentialRecord]
    )? {
        guard (credentials as AnyObject) === self else { return try await accountThenCredentials(named: name, in: credentials) }
        let rows = try await pool.query(
            """
            SELECT a.name AS account_name, a.handle AS account_handle, a.display_name AS account_display_name, \(CredentialColumn.listOfC)
            FROM accounts a LEFT JOIN credentials c ON c.user_handle = a.handle WHERE a.\(Self.accountNamedSQL) ORDER BY c.created_at
            """, Self.keys(of: name), retry: .idempotent)
        guard let first = rows.first else { return nil }
        guard let accountName = first["account_name"], let handle = PGText.bytes(first["account_handle"]) else {
            throw WebAuthnError(.storageFailure, "accounts row is unreadable")
        }
        let account = try UserEntity(id: handle, name: accountName, displayName: first["account_display_name"])
        return (account, try rows.filter { $0["id"] != nil }.map(Self.record))
    }

    /// The account with this user handle, if any.
    public func account(handle: [UInt8]) async throws -> UserEntity? {
        try await pool.query("SELECT name, handle, display_name FROM accounts WHERE handle = $1", [PGText.bytea(handle)], retry: .idempotent).first.map(
            Self.account)
    }

    /// Creates `user` with its first credential in one statement, both or neither.
    /// Throws `username_unavailable` when the name (or its look-alike key) or the
    /// handle is taken, `credential_already_registered` when the credential ID is.
    public func create(_ user: UserEntity, firstCredential r: CredentialRecord) async throws {
        // One statement: both rows or neither. The credential's owner is the new account's handle;
        // its other columns are parameters from $6 on.
        let columns = CredentialColumn.allCases.filter { $0 != .userHandle }
        var next = 5
        let selected = CredentialColumn.allCases.map { column -> String in
            guard column != .userHandle else { return "handle" }
            next += 1
            return "$\(next)"
        }
        do {
            _ = try await pool.query(
                """
                WITH account AS (
                    INSERT INTO accounts (name, name_key, capitals_key, handle, display_name) VALUES ($1, $2, $3, $4, $5) RETURNING handle
                )
                INSERT INTO credentials (\(CredentialColumn.list))
                SELECT \(selected.joined(separator: ", ")) FROM account
                """,
                Self.accountValues(user) + r.values(columns).map(PGText.value))
        } catch let error as PostgresConnection.Failure where error.isUniqueViolation {
            // The account is inserted first; a duplicate in credentials is the credential ID.
            throw Self.duplicate(error, creating: user, credential: r)
        }
    }

    /// The columns name, name_key, capitals_key, handle and display_name of a new account.
    static func accountValues(_ user: UserEntity) -> [String?] {
        [user.name, UserName.lookalikeKey(user.name), UserName.capitalsKey(user.name), PGText.bytea(user.id), user.displayName]
    }

    /// The error for a unique violation while creating `user` with credential `r`: the credential
    /// when the violation is in `credentials`, else the account's name, key or handle.
    static func duplicate(_ error: PostgresConnection.Failure, creating user: UserEntity?, credential r: CredentialRecord) -> WebAuthnError {
        guard let user, error.table != "credentials" else {
            return WebAuthnError(
                .credentialAlreadyRegistered, "credential \(Base64URL.encode(r.id).prefix(96)) is already registered", step: "WebAuthn L3 §7.1 step 27")
        }
        return WebAuthnError(.usernameUnavailable, "an account named \(user.name.prefix(64)) (or a name that looks the same) exists")
    }

    /// A registration's writes in one statement, one transaction and one round trip: the
    /// challenge consumed and, only if it was there, the credential stored (with its new
    /// account) and the session replaced. A unique violation fails the whole statement: nothing changes.
    public func commitRegistration(
        consuming challenge: [UInt8], creating account: UserEntity?, credential r: CredentialRecord, signingIn session: SignedInSession?,
        replacing oldSession: [UInt8]?
    ) async throws -> Bool {
        do {
            guard let account else {
                return try await registration(consuming: challenge, owner: nil, from: "consumed", credential: r, signingIn: session, replacing: oldSession)
            }
            return try await registration(
                consuming: challenge,
                prelude: [
                    "account AS (INSERT INTO accounts (name, name_key, capitals_key, handle, display_name) SELECT $2, $3, $4, $5, $6 FROM consumed RETURNING handle)"
                ],
                preludeValues: Self.accountValues(account),
                owner: "handle", from: "account", credential: r, signingIn: session, replacing: oldSession)
        } catch let error as PostgresConnection.Failure where error.isUniqueViolation {
            throw Self.duplicate(error, creating: account, credential: r)
        }
    }

    /// A registration's writes for a credential added to an existing account, in one statement:
    /// the credential's owner is the account's handle, read under a share lock and only while
    /// `webauthn_credential_room` (migration 8) finds it holding fewer than `limit` credentials. That
    /// function locks the account's row and counts after the lock, so concurrent registrations to
    /// one account wait for each other and cannot together pass the limit; a deletion under way is
    /// waited for and then leaves no row. No owner: the NOT NULL constraint refuses the insert and
    /// nothing changes (`account_unknown`, or `credential_limit_reached`). A deletion that comes
    /// after waits for this statement; its last statement then removes what it committed
    /// (``deleteAccount(handle:)``).
    public func commitRegistration(
        consuming challenge: [UInt8], addingTo account: [UInt8], limit: Int, credential r: CredentialRecord, signingIn session: SignedInSession?,
        replacing oldSession: [UInt8]?
    ) async throws -> Bool {
        guard r.userHandle == account else { throw WebAuthnError(.configurationInvalid, "the credential's user handle is not the account's") }
        do {
            // The account's lock before the ceremony's row (`consumeWhen`): the order in which the
            // sessions' ending takes them (``deleteSessions(userHandle:)``).
            return try await registration(
                consuming: challenge, consumeWhen: "webauthn_lock_account($2)",
                prelude: ["owner AS (SELECT handle FROM accounts WHERE handle = $2 AND webauthn_credential_room($2, $3) FOR SHARE)"],
                preludeValues: [PGText.bytea(account), String(limit)], owner: "(SELECT handle FROM owner)", from: "consumed", credential: r,
                signingIn: session, replacing: oldSession)
        } catch let error as PostgresConnection.Failure where error.isNotNullViolation {
            guard try await self.account(handle: account) != nil else { throw accountDeleted }
            throw credentialLimit(held: try await credentials(forUser: account).count, limit: limit)
        } catch let error as PostgresConnection.Failure where error.isUniqueViolation {
            throw Self.duplicate(error, creating: nil, credential: r)
        }
    }

    /// The one statement of a registration: the ceremony consumed (where `consumeWhen`, an SQL
    /// condition evaluated before the ceremony's row is locked, holds); `prelude`, more CTEs whose
    /// values are numbered from `$2`; the credential inserted from `source`, its user handle the
    /// SQL expression `owner` (nil: the record's own); the session replaced when given. Whether a
    /// ceremony was consumed.
    private func registration(
        consuming challenge: [UInt8], consumeWhen: String = "TRUE", prelude: [String] = [], preludeValues: [String?] = [], owner: String?,
        from source: String,
        credential r: CredentialRecord, signingIn session: SignedInSession?, replacing oldSession: [UInt8]?
    ) async throws -> Bool {
        var values: [String?] = [PGText.bytea(challenge)] + preludeValues
        var next = values.count
        let selected = CredentialColumn.allCases.map { column -> String in
            if column == .userHandle, let owner { return owner }
            next += 1
            return "$\(next)"
        }
        values += r.values(CredentialColumn.allCases.filter { $0 != .userHandle || owner == nil }).map(PGText.value)
        var ctes = ["consumed AS (DELETE FROM challenges WHERE challenge = $1 AND \(consumeWhen) RETURNING challenge)"] + prelude
        ctes.append("credential AS (INSERT INTO credentials (\(CredentialColumn.list)) SELECT \(selected.joined(separator: ", ")) FROM \(source) RETURNING id)")
        if let session {
            ctes.append(Self.sessionReplacement(first: values.count + 1, when: "EXISTS (SELECT 1 FROM credential)"))
            values += Self.sessionValues(session, replacing: oldSession)
        }
        let rows = try await pool.query("WITH \(ctes.joined(separator: ",\n")) SELECT (SELECT COUNT(*) FROM consumed) AS consumed", values)
        return rows.first?["consumed"] == "1"
    }

    static func account(_ row: PostgresConnection.Row) throws -> UserEntity {
        guard let name = row["name"], let handle = PGText.bytes(row["handle"]) else { throw WebAuthnError(.storageFailure, "accounts row is unreadable") }
        return try UserEntity(id: handle, name: name, displayName: row["display_name"])
    }

    // MARK: Settings

    /// The server secret kept in the database: made once by the first
    /// instance that asks, then shared by every instance and restart.
    public func serverSecret() async throws -> [UInt8] {
        _ = try await pool.query(
            "INSERT INTO settings (name, value) VALUES ('server_secret', $1) ON CONFLICT (name) DO NOTHING",
            [PGText.bytea(SecureRandom.secret(32))], retry: .idempotent)
        guard let value = PGText.bytes(try await pool.query("SELECT value FROM settings WHERE name = 'server_secret'", retry: .idempotent).first?["value"]),
            value.count >= 32
        else { throw WebAuthnError(.storageFailure, "settings.server_secret is unreadable") }
        return value
    }

    // MARK: Account deletion and linked identities

    /// Sets the account's display name, in one `UPDATE`; false when there is no such account.
    public func setDisplayName(_ displayName: String, handle: [UInt8]) async throws -> Bool {
        !(try await pool.query("UPDATE accounts SET display_name = $1 WHERE handle = $2 RETURNING handle", [displayName, PGText.bytea(handle)])).isEmpty
    }

    /// Deletes the account with its credentials, linked identities, sessions and the ceremonies
    /// pending under them, in one statement; false when there is none. A second statement then
    /// removes what a registration it waited for committed (see ``deleteAccount(handle:reportingIdentitiesIn:)``).
    public func deleteAccount(handle: [UInt8]) async throws -> Bool {
        try await deleteAccountReporting(handle) != nil
    }

    /// Deletes the account as ``deleteAccount(handle:)`` does; when `identities` is this store, the
    /// identities its two statements removed (one linked while the deletion waited for its lock
    /// included), else those `identities` held just before.
    public func deleteAccount(handle: [UInt8], reportingIdentitiesIn identities: any LinkedIdentityStore) async throws -> [LinkedIdentity]? {
        guard identities as AnyObject === self else {
            let linked = try await identities.identities(forUser: handle)
            return try await deleteAccountReporting(handle) == nil ? nil : linked
        }
        return try await deleteAccountReporting(handle)
    }

    /// The deletion: the identities it removed, oldest first; nil when there was no account.
    private func deleteAccountReporting(_ handle: [UInt8]) async throws -> [LinkedIdentity]? {
        // One statement: the account, its credentials, identities, sessions and pending ceremonies, or
        // nothing. Its rows: one per identity removed, and a marker row for the account (its columns named by the first).
        let rows = try await pool.query(
            """
            WITH account AS (DELETE FROM accounts WHERE handle = $1 RETURNING handle),
                 ceremonies_gone AS (
                     DELETE FROM challenges WHERE binding IN (SELECT id_hash FROM sessions WHERE user_handle IN (SELECT handle FROM account))),
                 credentials_gone AS (DELETE FROM credentials WHERE user_handle IN (SELECT handle FROM account)),
                 identities_gone AS (DELETE FROM identities WHERE user_handle IN (SELECT handle FROM account) RETURNING \(Self.identityColumns)),
                 sessions_gone AS (DELETE FROM sessions WHERE user_handle IN (SELECT handle FROM account))
            SELECT FALSE AS account, \(Self.identityColumns) FROM identities_gone
            UNION ALL SELECT TRUE, \(Self.nullIdentityColumns) FROM account
            """, [PGText.bytea(handle)], retry: .idempotent)
        guard rows.contains(where: { $0["account"] == "t" }) else { return nil }
        // A registration or a link that held the account's row (``commitRegistration(consuming:addingTo:limit:credential:signingIn:replacing:)``,
        // ``link(_:)``) committed before the deletion went on, after this statement's snapshot was taken: what it
        // stored goes now, in a statement of its own (a fresh snapshot).
        let late = try await pool.query(
            """
            WITH gone AS (SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM accounts WHERE handle = $1)),
                 credentials_gone AS (DELETE FROM credentials WHERE user_handle = $1 AND EXISTS (SELECT 1 FROM gone)),
                 identities_gone AS (DELETE FROM identities WHERE user_handle = $1 AND EXISTS (SELECT 1 FROM gone) RETURNING \(Self.identityColumns)),
                 sessions_gone AS (DELETE FROM sessions WHERE user_handle = $1 AND EXISTS (SELECT 1 FROM gone))
            SELECT \(Self.identityColumns) FROM identities_gone
            """, [PGText.bytea(handle)], retry: .idempotent)
        return try (rows.filter { $0["account"] != "t" } + late).map(Self.identity).sorted { $0.createdAt < $1.createdAt }
    }
}
