public import Foundation
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// Accounts, the server secret and linked identities: the PostgreSQL store's AccountStore and
// LinkedIdentityStore (its sessions are in PostgresStore+Sessions.swift, its credentials and challenges in PostgresStore.swift).

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
            [PGText.bytea(SecureRandom.bytes(32))], retry: .idempotent)
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

    static let identityColumns = "provider, subject, user_handle, email, email_verified, is_private_email, refresh_token, created_at, updated_at"
    /// ``identityColumns``' places, empty (the account's marker row beside the identities removed).
    static let nullIdentityColumns =
        "NULL::text, NULL::text, NULL::bytea, NULL::text, NULL::boolean, NULL::boolean, NULL::bytea, NULL::double precision, NULL::double precision"

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
                INSERT INTO identities (provider, subject, user_handle, email, email_verified, is_private_email, refresh_token, created_at, updated_at)
                SELECT $6, $7, handle, $8, $9::boolean, $10::boolean, $11::bytea, $12, $13 FROM account
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
                WITH owner AS (SELECT handle FROM accounts WHERE handle = $9 FOR SHARE)
                INSERT INTO identities (provider, subject, user_handle, email, email_verified, is_private_email, refresh_token, created_at, updated_at)
                SELECT $1, $2, handle, $3, $4::boolean, $5::boolean, $6::bytea, $7, $8 FROM owner RETURNING subject
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
        try i.validate()
        let v = Self.identityValues(i)
        return
            !(try await pool.query(
                """
                UPDATE identities SET email = $1, email_verified = $2::boolean, is_private_email = $3::boolean, refresh_token = $4::bytea, updated_at = $5
                WHERE provider = $6 AND subject = $7 RETURNING subject
                """, [v[2], v[3], v[4], v[5], v[7], i.provider, i.subject], retry: .idempotent)).isEmpty
    }

    /// Replaces the identity's email fields, refresh token and `updatedAt` while its stored refresh
    /// token is `expected`, in one statement (the row lock of the update orders two at once: the
    /// second sees the first's token and changes nothing); false when it is not linked or its token
    /// changed. Throws `identity_invalid`; not sent again once it may have run, as every
    /// compare-and-set.
    public func update(_ i: LinkedIdentity, ifRefreshTokenIs expected: [UInt8]?) async throws -> Bool {
        try i.validate()
        let v = Self.identityValues(i)
        return
            !(try await pool.query(
                """
                UPDATE identities SET email = $1, email_verified = $2::boolean, is_private_email = $3::boolean, refresh_token = $4::bytea, updated_at = $5
                WHERE provider = $6 AND subject = $7 AND refresh_token IS NOT DISTINCT FROM $8::bytea RETURNING subject
                """, [v[2], v[3], v[4], v[5], v[7], i.provider, i.subject, expected.map(PGText.bytea)], retry: .ifNotSent)).isEmpty
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

    /// provider, subject, email, email_verified, is_private_email, refresh_token, created_at, updated_at, as text parameters.
    static func identityValues(_ i: LinkedIdentity) -> [String?] {
        [
            i.provider, i.subject, i.email, i.emailVerified.map(PGText.bool), i.isPrivateEmail.map(PGText.bool), i.refreshToken.map(PGText.bytea),
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
            isPrivateEmail: bool("is_private_email"), refreshToken: row["refresh_token"].flatMap(PGText.bytes),
            createdAt: Date(timeIntervalSince1970: created), updatedAt: Date(timeIntervalSince1970: updated))
    }
}
