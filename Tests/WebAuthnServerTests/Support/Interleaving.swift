import Foundation
import Synchronization
import WebAuthnCore
import WebAuthnSQLite

/// The SQLite store as the server's accounts and Apple identities, with hooks that run inside
/// one call: what another request or process did at that moment, made deterministic.
final class Interleaving: AccountStore, LinkedIdentityStore, SessionStore {
    typealias Hook = @Sendable () async throws -> Void
    let store: SQLiteStore
    /// Runs once, before the next `update` is forwarded.
    let beforeUpdate = Mutex<Hook?>(nil)
    /// Runs once, after the next `identities(forUser:)` has read and before it answers.
    let afterIdentities = Mutex<Hook?>(nil)
    /// Run once, before the next `link` is forwarded, and after it.
    let beforeLink = Mutex<Hook?>(nil), afterLink = Mutex<Hook?>(nil)
    /// Runs once, before the next `create(_:firstIdentity:)` is forwarded.
    let beforeCreate = Mutex<Hook?>(nil)
    /// Runs once, before the next `unlink` is forwarded.
    let beforeUnlink = Mutex<Hook?>(nil)
    /// Runs once, before the next session is stored (`insert` or `replace`).
    let beforeSessionWrite = Mutex<Hook?>(nil)

    init(_ store: SQLiteStore) { self.store = store }

    private static func take(_ hook: borrowing Mutex<Hook?>) -> Hook? {
        hook.withLock { h in
            defer { h = nil }; return h
        }
    }

    func account(named name: String) async throws -> UserEntity? { try await store.account(named: name) }
    func account(handle: [UInt8]) async throws -> UserEntity? { try await store.account(handle: handle) }
    func create(_ user: UserEntity, firstCredential: CredentialRecord) async throws { try await store.create(user, firstCredential: firstCredential) }
    func deleteAccount(handle: [UInt8]) async throws -> Bool { try await store.deleteAccount(handle: handle) }
    func deleteAccount(handle: [UInt8], reportingIdentitiesIn identities: any LinkedIdentityStore) async throws -> [LinkedIdentity]? {
        try await store.deleteAccount(handle: handle, reportingIdentitiesIn: identities as AnyObject === self ? store : identities)
    }
    func setDisplayName(_ displayName: String, handle: [UInt8]) async throws -> Bool { try await store.setDisplayName(displayName, handle: handle) }

    func identity(provider: String, subject: String) async throws -> LinkedIdentity? { try await store.identity(provider: provider, subject: subject) }
    func identities(forUser userHandle: [UInt8]) async throws -> [LinkedIdentity] {
        let read = try await store.identities(forUser: userHandle)
        try await Self.take(afterIdentities)?()
        return read
    }
    func create(_ user: UserEntity, firstIdentity: LinkedIdentity) async throws {
        try await Self.take(beforeCreate)?()
        try await store.create(user, firstIdentity: firstIdentity)
    }
    func link(_ identity: LinkedIdentity) async throws {
        try await Self.take(beforeLink)?()
        try await store.link(identity)
        try await Self.take(afterLink)?()
    }
    func update(_ identity: LinkedIdentity) async throws -> Bool {
        try await Self.take(beforeUpdate)?()
        return try await store.update(identity)
    }
    func update(_ identity: LinkedIdentity, ifRefreshTokenIs expected: [UInt8]?) async throws -> Bool {
        try await Self.take(beforeUpdate)?()
        return try await store.update(identity, ifRefreshTokenIs: expected)
    }
    func relink(provider: String, subject: String, to newSubject: String, at date: Date) async throws -> Bool {
        try await store.relink(provider: provider, subject: subject, to: newSubject, at: date)
    }
    func unlink(provider: String, subject: String) async throws -> LinkedIdentity? {
        try await Self.take(beforeUnlink)?()
        return try await store.unlink(provider: provider, subject: subject)
    }
    func unlink(provider: String, subject: String, ifRefreshTokenIs expected: [UInt8]?) async throws -> LinkedIdentity? {
        try await Self.take(beforeUnlink)?()
        return try await store.unlink(provider: provider, subject: subject, ifRefreshTokenIs: expected)
    }

    func insert(_ session: SignedInSession) async throws {
        try await Self.take(beforeSessionWrite)?()
        try await store.insert(session)
    }
    func replace(_ old: [UInt8]?, with session: SignedInSession) async throws {
        try await Self.take(beforeSessionWrite)?()
        try await store.replace(old, with: session)
    }
    func session(idHash: [UInt8]) async throws -> SignedInSession? { try await store.session(idHash: idHash) }
    func delete(idHash: [UInt8]) async throws { try await store.delete(idHash: idHash) }
    func deleteSessions(userHandle: [UInt8]) async throws -> Int { try await store.deleteSessions(userHandle: userHandle) }
    func deleteSessions(userHandle: [UInt8], except kept: [UInt8]) async throws -> Int { try await store.deleteSessions(userHandle: userHandle, except: kept) }
    func sweepSessions(expiredBefore date: Date) async throws -> Int { try await store.sweepSessions(expiredBefore: date) }
}
