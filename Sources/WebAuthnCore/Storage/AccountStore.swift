import Synchronization

/// Where accounts live: a user name and its user handle.
///
/// Contract: `account(named:creating:)` is an atomic get-or-create, so two
/// concurrent first registrations of one name yield one account.
public protocol AccountStore: Sendable {
    func account(named name: String) async throws -> UserEntity?
    func account(handle: [UInt8]) async throws -> UserEntity?
    /// The account with `candidate.name`, created from `candidate` if there is none.
    func account(named name: String, creating candidate: UserEntity) async throws -> UserEntity
}

/// A thread-safe in-memory ``AccountStore``.
public final class InMemoryAccountStore: AccountStore {
    private let state = Mutex<[String: UserEntity]>([:])

    public init() {}

    public func account(named name: String) async throws -> UserEntity? { state.withLock { $0[name] } }

    public func account(handle: [UInt8]) async throws -> UserEntity? {
        state.withLock { accounts in accounts.values.first { $0.id == handle } }
    }

    public func account(named name: String, creating candidate: UserEntity) async throws -> UserEntity {
        state.withLock { accounts in
            if let existing = accounts[name] { return existing }
            accounts[name] = candidate
            return candidate
        }
    }
}
