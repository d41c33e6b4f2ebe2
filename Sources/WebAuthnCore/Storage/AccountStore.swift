internal import Synchronization
public import _WebAuthnEncoding
package import _WebAuthnCrypto

/// Where accounts live: a user name and its user handle.
///
/// Contract (the shared contract tests hold every implementation to it):
/// - Names are unique by their look-alike key (``UserName/lookalikeKey(_:)``):
///   `account(named:)` finds `Alice` when asked for `alice`.
/// - An account exists only together with a credential: `create(_:firstCredential:)`
///   stores both atomically, or neither. It throws `username_unavailable` when
///   an account with the same key exists and `credential_already_registered`
///   when the credential ID does; nothing is stored then. So options alone
///   never create or reserve a name, and a crash leaves no empty account.
public protocol AccountStore: Sendable {
    func account(named name: String) async throws -> UserEntity?
    func account(handle: [UInt8]) async throws -> UserEntity?
    /// Creates `user` with its first credential: both, or nothing.
    func create(_ user: UserEntity, firstCredential: CredentialRecord) async throws
}

/// A thread-safe in-memory ``AccountStore`` that stores first credentials in
/// an ``InMemoryCredentialStore``.
public final class InMemoryAccountStore: AccountStore {
    private let state = Mutex<(byKey: [String: UserEntity], byHandle: [ByteKey: UserEntity])>(([:], [:]))
    /// Where `create(_:firstCredential:)` puts the first credential.
    public let credentials: InMemoryCredentialStore

    public init(credentials: InMemoryCredentialStore = InMemoryCredentialStore()) {
        self.credentials = credentials
    }

    public func account(named name: String) async throws -> UserEntity? {
        let key = UserName.lookalikeKey(name)
        return state.withLock { $0.byKey[key] }
    }

    public func account(handle: [UInt8]) async throws -> UserEntity? {
        state.withLock { $0.byHandle[ByteKey(handle)] }
    }

    public func create(_ user: UserEntity, firstCredential: CredentialRecord) async throws {
        let key = UserName.lookalikeKey(user.name)
        try state.withLock { (accounts) throws(WebAuthnError) in
            guard accounts.byKey[key] == nil, accounts.byHandle[ByteKey(user.id)] == nil else {
                throw WebAuthnError(.usernameUnavailable, "an account named \(user.name.prefix(64)) (or a name that looks the same) exists")
            }
            try credentials.insertNow(firstCredential)
            accounts.byKey[key] = user
            accounts.byHandle[ByteKey(user.id)] = user
        }
    }
}
