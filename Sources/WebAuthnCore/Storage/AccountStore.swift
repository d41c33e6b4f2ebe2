public import Foundation
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Where accounts live: a user name and its user handle.
///
/// Contract (the shared contract tests hold every implementation to it):
/// - Names are unique by their look-alike key (``UserName/lookalikeKey(_:)``) and by their
///   capitals key (``UserName/capitalsKey(_:)``): a name is taken when either key is an
///   account's. `account(named:)` finds the account with the name's look-alike key, else the one
///   with its capitals key: `Alice` when asked for `alice`, `Борис` for `борис`.
/// - An account exists only together with a credential: `create(_:firstCredential:)`
///   stores both atomically, or neither. It throws `username_unavailable` when
///   an account with the same key exists and `credential_already_registered`
///   when the credential ID does; nothing is stored then. So options alone
///   never create or reserve a name, and a crash leaves no empty account.
public protocol AccountStore: Sendable {
    /// The account whose name has the same look-alike key as `name`, else the same capitals key, if any.
    func account(named name: String) async throws -> UserEntity?
    /// The account with this user handle, if any.
    func account(handle: [UInt8]) async throws -> UserEntity?
    /// Creates `user` with its first credential: both, or nothing.
    func create(_ user: UserEntity, firstCredential: CredentialRecord) async throws
    /// Deletes the account with its credentials and linked identities (and, in a
    /// store that also keeps sessions, its sessions and, when it keeps ceremonies too, the
    /// ceremonies pending under those sessions' bindings, so that a registration the account
    /// started cannot store a credential after it), atomically; false when there is none.
    func deleteAccount(handle: [UInt8]) async throws -> Bool
    /// Deletes the account as ``deleteAccount(handle:)`` does, and returns the identities of
    /// `identities` that were linked to it and deleted with it, as they were then (refresh tokens
    /// included); nil when there is no such account. A store that keeps the identities itself
    /// (`identities` is the store) reads them in the deletion's own transaction, so an identity
    /// linked while the account is being deleted is reported too and its refresh token can still
    /// be revoked. The default reads them first, then deletes the account.
    func deleteAccount(handle: [UInt8], reportingIdentitiesIn identities: any LinkedIdentityStore) async throws -> [LinkedIdentity]?
    /// Sets the account's display name (not its user name, which is its key); false when there is no such account.
    func setDisplayName(_ displayName: String, handle: [UInt8]) async throws -> Bool
    /// The account named `name` (as ``account(named:)`` finds it) with its credentials in
    /// `credentials`, oldest first; nil when there is no such account. A store that keeps both
    /// answers in one read (one round trip for a database server); the default reads the
    /// account, then its credentials.
    func account(named name: String, withCredentialsIn credentials: any CredentialStore) async throws -> (account: UserEntity, credentials: [CredentialRecord])?
}

extension AccountStore {
    /// Reads the account, then its credentials.
    public func account(named name: String, withCredentialsIn credentials: any CredentialStore) async throws -> (
        account: UserEntity, credentials: [CredentialRecord]
    )? {
        try await accountThenCredentials(named: name, in: credentials)
    }

    /// The account, then its credentials, in two reads (the default, and the SQL stores' answer
    /// when the credentials are in another store).
    package func accountThenCredentials(named name: String, in credentials: any CredentialStore) async throws -> (
        account: UserEntity, credentials: [CredentialRecord]
    )? {
        guard let account = try await account(named: name) else { return nil }
        return (account, try await credentials.credentials(forUser: account.id))
    }

    /// Reads the account's identities, then deletes it (not atomic: an identity linked in between
    /// is deleted unreported).
    public func deleteAccount(handle: [UInt8], reportingIdentitiesIn identities: any LinkedIdentityStore) async throws -> [LinkedIdentity]? {
        let linked = try await identities.identities(forUser: handle)
        return try await deleteAccount(handle: handle) ? linked : nil
    }

    /// A store written before display names could change: refused with `configuration_invalid`.
    public func setDisplayName(_ displayName: String, handle: [UInt8]) async throws -> Bool {
        throw WebAuthnError(.configurationInvalid, "this account store cannot change display names")
    }
}

/// A thread-safe in-memory ``AccountStore`` and ``LinkedIdentityStore`` that
/// stores first credentials in an ``InMemoryCredentialStore``.
public final class InMemoryAccountStore: AccountStore, LinkedIdentityStore {
    private struct State {
        var byKey: [String: ByteKey] = [:]
        var byCapitalsKey: [String: ByteKey] = [:]
        var byHandle: [ByteKey: UserEntity] = [:]
        var identities: [IdentityKey: LinkedIdentity] = [:]
    }
    private struct IdentityKey: Hashable {
        let provider: String, subject: String
        init(_ provider: String, _ subject: String) {
            // By bytes: Swift's String equality would merge canonically equivalent subjects.
            self.provider = provider
            self.subject = subject
        }
        static func == (a: Self, b: Self) -> Bool { Bytes.sameUTF8(a.provider, b.provider) && Bytes.sameUTF8(a.subject, b.subject) }
        func hash(into hasher: inout Hasher) {
            for b in provider.utf8 { hasher.combine(b) }
            hasher.combine(0xFF as UInt8)
            for b in subject.utf8 { hasher.combine(b) }
        }
    }
    private let state = Locked(State())
    /// Where `create(_:firstCredential:)` puts the first credential.
    public let credentials: InMemoryCredentialStore

    /// An empty store whose accounts keep their credentials in `credentials`.
    public init(credentials: InMemoryCredentialStore = InMemoryCredentialStore()) {
        self.credentials = credentials
    }

    /// The account whose name has the same look-alike key as `name`, else the same capitals key, if any.
    public func account(named name: String) async throws -> UserEntity? {
        let key = UserName.lookalikeKey(name), capitalsKey = UserName.capitalsKey(name)
        return state.withLock { s in (s.byKey[key] ?? s.byCapitalsKey[capitalsKey]).flatMap { s.byHandle[$0] } }
    }

    /// The account with this user handle, if any.
    public func account(handle: [UInt8]) async throws -> UserEntity? {
        state.withLock { $0.byHandle[ByteKey(handle)] }
    }

    /// Creates `user` with its first credential, both or neither. Throws
    /// `username_unavailable` when the name's look-alike key or the handle is
    /// taken, `credential_already_registered` when the credential ID is.
    public func create(_ user: UserEntity, firstCredential: CredentialRecord) async throws {
        try state.withLock { (s) throws(WebAuthnError) in
            try Self.checkNew(user, in: s)
            try credentials.insertNow(firstCredential)
            Self.add(user, to: &s)
        }
    }

    /// Deletes the account with its credentials and linked identities; false when there is none.
    public func deleteAccount(handle: [UInt8]) async throws -> Bool {
        deleteAccountNow(handle) != nil
    }

    /// Deletes the account as ``deleteAccount(handle:)`` does; when `identities` is this store, the
    /// identities it removed in the same step, else those `identities` held just before.
    public func deleteAccount(handle: [UInt8], reportingIdentitiesIn identities: any LinkedIdentityStore) async throws -> [LinkedIdentity]? {
        guard identities as AnyObject === self else {
            let linked = try await identities.identities(forUser: handle)
            return deleteAccountNow(handle) == nil ? nil : linked
        }
        return deleteAccountNow(handle)
    }

    /// The deletion, under the lock: the identities it removed, oldest first; nil when there was no account.
    private func deleteAccountNow(_ handle: [UInt8]) -> [LinkedIdentity]? {
        let removed = state.withLock { s -> [LinkedIdentity]? in
            guard let user = s.byHandle.removeValue(forKey: ByteKey(handle)) else { return nil }
            s.byKey.removeValue(forKey: UserName.lookalikeKey(user.name))
            s.byCapitalsKey.removeValue(forKey: UserName.capitalsKey(user.name))
            let linked = s.identities.values.filter { $0.userHandle == handle }.sorted { $0.createdAt < $1.createdAt }
            s.identities = s.identities.filter { $0.value.userHandle != handle }
            return linked
        }
        if removed != nil { credentials.deleteAll(userHandle: handle) }
        return removed
    }

    /// Sets the account's display name; false when there is no such account.
    public func setDisplayName(_ displayName: String, handle: [UInt8]) async throws -> Bool {
        state.withLock { s -> Bool in
            guard let user = s.byHandle[ByteKey(handle)], let renamed = try? UserEntity(id: user.id, name: user.name, displayName: displayName) else {
                return false
            }
            s.byHandle[ByteKey(handle)] = renamed
            return true
        }
    }

    // MARK: LinkedIdentityStore

    /// The identity of `subject` at `provider` (compared byte for byte), if linked.
    public func identity(provider: String, subject: String) async throws -> LinkedIdentity? {
        state.withLock { $0.identities[IdentityKey(provider, subject)] }
    }

    /// The account's linked identities, oldest first.
    public func identities(forUser userHandle: [UInt8]) async throws -> [LinkedIdentity] {
        state.withLock { s in s.identities.values.filter { $0.userHandle == userHandle }.sorted { $0.createdAt < $1.createdAt } }
    }

    /// Creates `user` with its first identity, both or neither. Throws
    /// `identity_invalid`, `username_unavailable` or `identity_already_linked`.
    public func create(_ user: UserEntity, firstIdentity identity: LinkedIdentity) async throws {
        try identity.validate()
        try state.withLock { (s) throws(WebAuthnError) in
            try Self.checkNew(user, in: s)
            guard s.identities[IdentityKey(identity.provider, identity.subject)] == nil else { throw LinkedIdentity.alreadyLinked(identity.provider) }
            Self.add(user, to: &s)
            s.identities[IdentityKey(identity.provider, identity.subject)] = identity
        }
    }

    /// Links an identity to its existing account. Throws `identity_invalid`,
    /// `account_unknown` or `identity_already_linked`.
    public func link(_ identity: LinkedIdentity) async throws {
        try identity.validate()
        try state.withLock { (s) throws(WebAuthnError) in
            guard s.byHandle[ByteKey(identity.userHandle)] != nil else { throw LinkedIdentity.unknownAccount() }
            guard s.identities[IdentityKey(identity.provider, identity.subject)] == nil else { throw LinkedIdentity.alreadyLinked(identity.provider) }
            s.identities[IdentityKey(identity.provider, identity.subject)] = identity
        }
    }

    /// Replaces the identity's email fields, refresh token and `updatedAt`; false
    /// when it is not linked. Throws `identity_invalid`.
    public func update(_ identity: LinkedIdentity) async throws -> Bool {
        try identity.validate()
        return update(identity) { _ in true }
    }

    /// Replaces the identity's email fields, refresh token and `updatedAt` while its stored refresh
    /// token is `expected`, under the lock; false when it is not linked or its token changed.
    /// Throws `identity_invalid`.
    public func update(_ identity: LinkedIdentity, ifRefreshTokenIs expected: [UInt8]?) async throws -> Bool {
        try identity.validate()
        return update(identity) { $0.refreshToken == expected }
    }

    private func update(_ identity: LinkedIdentity, if unchanged: (LinkedIdentity) -> Bool) -> Bool {
        state.withLock { s in
            let key = IdentityKey(identity.provider, identity.subject)
            guard let current = s.identities[key], unchanged(current) else { return false }
            var next = current
            next.email = identity.email
            next.emailVerified = identity.emailVerified
            next.isPrivateEmail = identity.isPrivateEmail
            next.emailEnabled = identity.emailEnabled
            next.emailChangedAt = identity.emailChangedAt
            next.refreshToken = identity.refreshToken
            next.updatedAt = identity.updatedAt
            s.identities[key] = next
            return true
        }
    }

    /// Moves the link of `subject` to `newSubject` (same account, `updatedAt` set to
    /// `date`); false when `subject` is not linked. Throws `identity_invalid` or
    /// `identity_already_linked` (when `newSubject` is linked already).
    public func relink(provider: String, subject: String, to newSubject: String, at date: Date) async throws -> Bool {
        try state.withLock { (s) throws(WebAuthnError) -> Bool in
            guard let current = s.identities[IdentityKey(provider, subject)] else { return false }
            let moved = LinkedIdentity(
                provider: provider, subject: newSubject, userHandle: current.userHandle, email: current.email,
                emailVerified: current.emailVerified, isPrivateEmail: current.isPrivateEmail, emailEnabled: current.emailEnabled,
                emailChangedAt: current.emailChangedAt, refreshToken: current.refreshToken, createdAt: current.createdAt, updatedAt: date)
            try moved.validate()
            guard s.identities[IdentityKey(provider, newSubject)] == nil else { throw LinkedIdentity.alreadyLinked(provider) }
            s.identities.removeValue(forKey: IdentityKey(provider, subject))
            s.identities[IdentityKey(provider, newSubject)] = moved
            return true
        }
    }

    /// Removes the link and returns it; nil when it was not linked.
    public func unlink(provider: String, subject: String) async throws -> LinkedIdentity? {
        state.withLock { $0.identities.removeValue(forKey: IdentityKey(provider, subject)) }
    }

    /// Removes the link while its stored refresh token is `expected`, under the lock, and returns
    /// it; nil when it is not linked or its token changed.
    public func unlink(provider: String, subject: String, ifRefreshTokenIs expected: [UInt8]?) async throws -> LinkedIdentity? {
        state.withLock { s in
            let key = IdentityKey(provider, subject)
            guard let current = s.identities[key], current.refreshToken == expected else { return nil }
            return s.identities.removeValue(forKey: key)
        }
    }

    private static func checkNew(_ user: UserEntity, in s: State) throws(WebAuthnError) {
        guard s.byKey[UserName.lookalikeKey(user.name)] == nil, s.byCapitalsKey[UserName.capitalsKey(user.name)] == nil,
            s.byHandle[ByteKey(user.id)] == nil
        else {
            throw WebAuthnError(.usernameUnavailable, "an account named \(user.name.prefix(64)) (or a name that looks the same) exists")
        }
    }

    private static func add(_ user: UserEntity, to s: inout State) {
        s.byKey[UserName.lookalikeKey(user.name)] = ByteKey(user.id)
        s.byCapitalsKey[UserName.capitalsKey(user.name)] = ByteKey(user.id)
        s.byHandle[ByteKey(user.id)] = user
    }
}

/// What ``AccountWayInGuarding/deleteCredential(id:ofAccount:)`` did.
package enum CredentialDeletion: Sendable, Equatable {
    /// The credential (or identity) is gone.
    case deleted
    /// It is the account's last way to sign in (no other credential, no other linked identity): kept.
    case lastWayIn
    /// The account holds no credential with that ID (or no such identity).
    case notFound
}

/// A store of accounts with their credentials and linked identities that deletes a credential
/// only while its account keeps another way in, in one transaction: two deletions of an account's
/// last two credentials, from any processes sharing the store, cannot both pass.
package protocol AccountWayInGuarding: Sendable {
    /// Deletes `handle`'s credential `id` unless it is the account's last way to sign in.
    func deleteCredential(id: [UInt8], ofAccount handle: [UInt8]) async throws -> CredentialDeletion
    /// Unlinks `handle`'s identity `subject` at `provider` unless it is the account's last way to
    /// sign in; `.deleted` comes with the unlinked identity's refresh token (sealed), if it had one.
    func unlinkIdentity(provider: String, subject: String, ofAccount handle: [UInt8]) async throws -> (CredentialDeletion, refreshToken: [UInt8]?)
}
