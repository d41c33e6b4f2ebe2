public import Foundation
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Where credential records live.
///
/// Contract (every implementation, and the shared contract tests, hold to it):
/// - `insert` is atomic: it stores the whole record or nothing, and throws
///   `credential_already_registered` if the ID exists.
/// - `update(_:expectedSignCount:)` is a compare-and-set: it writes only if
///   the stored counter still equals `expectedSignCount`, and says whether it did.
/// - Reads return what the last successful write stored.
public protocol CredentialStore: Sendable {
    /// The record with this credential ID, if any.
    func credential(id: [UInt8]) async throws -> CredentialRecord?
    /// The user's credentials (the engine lists them in `excludeCredentials` and `allowCredentials`).
    func credentials(forUser userHandle: [UInt8]) async throws -> [CredentialRecord]
    /// Stores a new record, atomically; throws `credential_already_registered` when the ID exists.
    func insert(_ record: CredentialRecord) async throws
    /// Compare-and-set: writes the record only if the stored counter still equals
    /// `expectedSignCount`; returns whether it did.
    func update(_ record: CredentialRecord, expectedSignCount: UInt32) async throws -> Bool
    /// Removes a credential; returns whether it existed.
    func delete(id: [UInt8]) async throws -> Bool
    /// Sets (or, with nil, clears) the owner's name for the credential `id` if it belongs
    /// to `userHandle`; writes nothing else, and returns whether it did.
    func rename(id: [UInt8], ofUser userHandle: [UInt8], to name: String?) async throws -> Bool
}

extension CredentialStore {
    /// A store written before credentials had names: renaming is refused with `configuration_invalid`.
    public func rename(id: [UInt8], ofUser userHandle: [UInt8], to name: String?) async throws -> Bool {
        throw WebAuthnError(.configurationInvalid, "this credential store cannot rename credentials")
    }
}

/// Where pending ceremonies wait for their response.
///
/// Contract:
/// - `consume` removes and returns the ceremony atomically, so that of two
///   concurrent consumers of one challenge exactly one gets it; `pending`
///   reads without removing.
/// - `insert` keeps at most ``PendingCeremony/maxPerBinding`` ceremonies per
///   binding (the session that asked): inserting one more drops that
///   binding's oldest, so one session cannot pile up ceremonies.
/// - `sweep(expiredBefore:)` removes every ceremony whose `expiresAt` is
///   before the date (the engine passes its clock's now, once per sweep
///   interval) and returns how many remain; SQL stores use an index on expiry.
/// - Expiry is judged by the caller with its clock; stores may drop entries
///   past `expiresAt` at any time.
public protocol ChallengeStore: Sendable {
    /// Keeps a ceremony under its challenge, at most ``PendingCeremony/maxPerBinding`` per binding.
    func insert(_ ceremony: PendingCeremony) async throws
    /// The ceremony under `challenge`, without removing it.
    func pending(challenge: [UInt8]) async throws -> PendingCeremony?
    /// Removes and returns the ceremony under `challenge`, atomically: of two
    /// concurrent consumers exactly one gets it.
    func consume(challenge: [UInt8]) async throws -> PendingCeremony?
    /// Removes every ceremony that expired before `date`; returns how many remain.
    func sweep(expiredBefore date: Date) async throws -> Int
    /// Removes up to `count` of the ceremonies that expire first, to make room when the relying
    /// party holds as many as it may (a flood then shortens lifetimes instead of blocking new
    /// ceremonies); returns how many it removed.
    func evictOldest(_ count: Int) async throws -> Int
}

extension ChallengeStore {
    /// A store written before eviction: removes nothing, so a full engine refuses new ceremonies.
    public func evictOldest(_ count: Int) async throws -> Int { 0 }
}

/// The outcome of ``SignInCommitting/commitSignIn(consuming:updating:expectedSignCount:)``.
public enum SignInCommit: Sendable, Equatable {
    /// The challenge was consumed and the record written, in one transaction.
    case committed
    /// No ceremony was waiting under the challenge (another response consumed it): nothing changed.
    case challengeGone
    /// The stored counter was no longer the expected one: the challenge was consumed, the record not written.
    case counterChanged
}

/// A store of both challenges and credentials that finishes a sign-in in one transaction:
/// the challenge consumed and the counter compare-and-set committed together, one durable
/// write instead of two. ``WebAuthnEngine`` uses it when its challenge store and credential
/// store are the same object; otherwise it consumes, then updates.
///
/// Contract: of two concurrent commits for one challenge exactly one sees it; a commit
/// writes only the fields ``CredentialStore/update(_:expectedSignCount:)`` writes, and only if
/// the stored counter still equals `expectedSignCount`.
public protocol SignInCommitting: ChallengeStore, CredentialStore {
    /// Consumes the pending ceremony under `challenge` and, in the same transaction,
    /// writes `record`'s counter, backup state, UV-initialized flag and last use if the
    /// stored counter still equals `expectedSignCount`.
    func commitSignIn(consuming challenge: [UInt8], updating record: CredentialRecord, expectedSignCount: UInt32) async throws -> SignInCommit
    /// The same commit and, in the same transaction and only if it is `.committed`, the
    /// signed-in session replaced (``SessionStore/replace(_:with:)``): the whole result step of
    /// a sign-in is one durable write. The engine calls it only on a store that is also the
    /// ``SessionStore`` it signs in to. The default commits, then replaces (two writes).
    func commitSignIn(
        consuming challenge: [UInt8], updating record: CredentialRecord, expectedSignCount: UInt32, signingIn session: SignedInSession,
        replacing oldSession: [UInt8]?
    ) async throws -> SignInCommit
    /// What a ceremony's result step needs from the store, read together (one round trip for a
    /// database server): the ceremony pending under `challenge` and the credential `credentialId`
    /// (the one signing in, or one a registration must not find), each nil when there is none.
    /// The default reads one, then the other.
    func pending(challenge: [UInt8], credentialId: [UInt8]) async throws -> (ceremony: PendingCeremony?, credential: CredentialRecord?)
    /// A registration's writes in one transaction: the ceremony under `challenge` consumed, the
    /// credential stored (with `account`, created with it as its first credential, when given),
    /// and `session` stored in place of `oldSession` when given. Returns false, having changed
    /// nothing, when no ceremony was waiting; throws `credential_already_registered` or
    /// `username_unavailable`, having changed nothing, when the credential or the account exists.
    /// The default consumes, then stores (giving the ceremony back if that fails), then replaces
    /// the session: up to three writes.
    func commitRegistration(
        consuming challenge: [UInt8], creating account: UserEntity?, credential: CredentialRecord, signingIn session: SignedInSession?,
        replacing oldSession: [UInt8]?
    ) async throws -> Bool
    /// ``commitRegistration(consuming:creating:credential:signingIn:replacing:)`` for a credential
    /// added to an existing account of this store (an ``AccountStore``), in the same transaction:
    /// the account must still exist, and hold fewer than `limit` credentials. Throws
    /// `account_unknown` when it was deleted (a registration started before an account's deletion
    /// must not store a credential of no account after it), or `credential_limit_reached` when it
    /// holds `limit`, having changed nothing; of concurrent registrations to one account, from any
    /// processes sharing the store, no more pass than the limit leaves room for. The default
    /// reads the account and counts its credentials, then commits (not atomic).
    func commitRegistration(
        consuming challenge: [UInt8], addingTo account: [UInt8], limit: Int, credential: CredentialRecord, signingIn session: SignedInSession?,
        replacing oldSession: [UInt8]?
    ) async throws -> Bool
}

/// A registration's writes one after the other, for stores that cannot make them one transaction:
/// the challenge consumed, then the credential stored (with its new account), and the challenge
/// given back if that fails (a lost race on the credential ID or the name).
struct StepwiseRegistration {
    let challenges: any ChallengeStore
    let credentials: any CredentialStore
    let accounts: (any AccountStore)?

    /// False when no ceremony was waiting under `challenge` (nothing changed).
    func commit(consuming challenge: [UInt8], creating account: UserEntity?, credential: CredentialRecord) async throws -> Bool {
        guard let ceremony = try await challenges.consume(challenge: challenge) else { return false }
        do {
            if let account {
                guard let accounts else {
                    throw WebAuthnError(.configurationInvalid, "this store keeps no accounts; a registration that creates one needs an account store")
                }
                try await accounts.create(account, firstCredential: credential)
            } else {
                try await credentials.insert(credential)
            }
        } catch {
            try? await challenges.insert(ceremony)
            throw error
        }
        return true
    }
}

extension SignInCommitting {
    /// Commits, then replaces the session (a store without the one-transaction form).
    public func commitSignIn(
        consuming challenge: [UInt8], updating record: CredentialRecord, expectedSignCount: UInt32, signingIn session: SignedInSession,
        replacing oldSession: [UInt8]?
    ) async throws -> SignInCommit {
        let outcome = try await commitSignIn(consuming: challenge, updating: record, expectedSignCount: expectedSignCount)
        guard outcome == .committed else { return outcome }
        guard let sessions = self as? any SessionStore else {
            throw WebAuthnError(.configurationInvalid, "this store keeps no sessions; sign in through the session store")
        }
        try await sessions.replace(oldSession, with: session)
        return outcome
    }

    /// Consumes, then stores the credential (and account), then replaces the session.
    public func commitRegistration(
        consuming challenge: [UInt8], creating account: UserEntity?, credential: CredentialRecord, signingIn session: SignedInSession?,
        replacing oldSession: [UInt8]?
    ) async throws -> Bool {
        guard
            try await StepwiseRegistration(challenges: self, credentials: self, accounts: self as? any AccountStore)
                .commit(consuming: challenge, creating: account, credential: credential)
        else { return false }
        if let session {
            guard let sessions = self as? any SessionStore else {
                throw WebAuthnError(.configurationInvalid, "this store keeps no sessions; sign in through the session store")
            }
            try await sessions.replace(oldSession, with: session)
        }
        return true
    }

    /// Reads the account and counts its credentials, then commits.
    public func commitRegistration(
        consuming challenge: [UInt8], addingTo account: [UInt8], limit: Int, credential: CredentialRecord, signingIn session: SignedInSession?,
        replacing oldSession: [UInt8]?
    ) async throws -> Bool {
        guard let accounts = self as? any AccountStore, try await accounts.account(handle: account) != nil else { throw accountDeleted }
        let held = try await credentials(forUser: account).count
        guard held < limit else { throw credentialLimit(held: held, limit: limit) }
        return try await commitRegistration(consuming: challenge, creating: nil, credential: credential, signingIn: session, replacing: oldSession)
    }

    /// Reads the ceremony, then the credential.
    public func pending(challenge: [UInt8], credentialId: [UInt8]) async throws -> (ceremony: PendingCeremony?, credential: CredentialRecord?) {
        (try await pending(challenge: challenge), try await credential(id: credentialId))
    }
}

extension PendingCeremony {
    /// The most pending ceremonies one binding (session) keeps; a new one drops the oldest.
    public static let maxPerBinding = 8
}

/// A signed-in browser session, as a ``SessionStore`` keeps it. The store
/// never sees the cookie itself, only a hash of it, so a copy of the
/// database does not let anyone sign in.
public struct SignedInSession: Sendable, Equatable {
    /// SHA-256 of the session secret the browser holds.
    public let idHash: [UInt8]
    /// The account signed in.
    public let userHandle: [UInt8]
    /// When the session signed in.
    public let createdAt: Date
    /// When the user was last verified in this session (a sign-in or re-authentication with
    /// user verification, or through an identity provider); `Date.distantPast` when the
    /// session's sign-in did not verify the user. Step-up checks it.
    public let authenticatedAt: Date
    /// When the session expires (callers judge expiry with their clock; a sweep removes it after).
    public let expiresAt: Date

    /// A session record. Each parameter sets the property of the same name.
    public init(idHash: [UInt8], userHandle: [UInt8], createdAt: Date, authenticatedAt: Date, expiresAt: Date) {
        self.idHash = idHash
        self.userHandle = userHandle
        self.createdAt = createdAt
        self.authenticatedAt = authenticatedAt
        self.expiresAt = expiresAt
    }

    /// The most sessions one account keeps; a new sign-in drops the oldest.
    public static let maxPerUser = 16
}

/// Where signed-in sessions live, shared by every instance that shares the
/// store (so no sticky sessions are needed).
///
/// Contract: `insert` keeps at most ``SignedInSession/maxPerUser`` sessions
/// per account (dropping the oldest); `session(idHash:)` returns nil for an
/// unknown id (callers judge expiry with their clock); `delete` ends a
/// session; `sweepSessions(expiredBefore:)` removes expired ones and returns
/// how many remain.
public protocol SessionStore: Sendable {
    /// Stores a session, keeping at most ``SignedInSession/maxPerUser`` per account.
    func insert(_ session: SignedInSession) async throws
    /// The session with this id hash, if stored (callers judge expiry).
    func session(idHash: [UInt8]) async throws -> SignedInSession?
    /// Ends a session; nothing happens when there is none.
    func delete(idHash: [UInt8]) async throws
    /// Ends every session of the account (sign-out everywhere, consent revoked, account deleted); returns how many.
    func deleteSessions(userHandle: [UInt8]) async throws -> Int
    /// Ends every session of the account but the one whose id hash is `kept` (after a credential
    /// is deleted, whoever signed in elsewhere goes); returns how many ended. The default reads
    /// `kept`, ends them all and stores `kept` again (three calls, not atomic).
    func deleteSessions(userHandle: [UInt8], except kept: [UInt8]) async throws -> Int
    /// Removes every session that expired before `date`; returns how many remain.
    func sweepSessions(expiredBefore date: Date) async throws -> Int
    /// A sign-in's session change: ends `old` (when given) and stores `session`, as one write
    /// where the store can. The default deletes, then inserts.
    func replace(_ old: [UInt8]?, with session: SignedInSession) async throws
    /// Ends `old` and stores `session` only if `old` is still stored as the same account's
    /// session; false (nothing changed) otherwise. For a sign-in that rests on `old` (an identity
    /// linked through it): an ending of the account's sessions racing it either comes first (then
    /// `old` is gone and nothing is stored) or comes after and ends `session` too. The SQL stores
    /// do it in one transaction, under the account's lock on PostgreSQL; the default stores
    /// `session`, reads `old` again and ends whichever must go.
    func replace(stored old: [UInt8], with session: SignedInSession) async throws -> Bool
}

/// A signed-in session for ``WebAuthnEngine/finishAuthentication(_:expectedChallenge:binding:signingIn:)``
/// or ``WebAuthnEngine/finishRegistration(_:expectedChallenge:binding:signingIn:)`` to store with the
/// ceremony it follows: in the ceremony's own transaction when `store` is also the engine's
/// ``SignInCommitting`` store, else right after the ceremony is committed. A ceremony that fails
/// stores no session. `Verified` is what the engine verified: ``AuthenticationResult`` or ``RegistrationResult``.
public struct SessionSignIn<Verified: Sendable>: Sendable {
    /// Where the session is kept.
    public let store: any SessionStore
    /// The id hash of the session it replaces (the browser's previous one), if any.
    public let replacing: [UInt8]?
    /// The session to store for a verified response; called once, after every check has passed
    /// and before anything is written. An error it throws fails the ceremony (`storage_failure`
    /// unless it is a ``WebAuthnError``), and nothing is written.
    public let session: @Sendable (Verified) async throws -> SignedInSession

    /// A session to store with a ceremony. Each parameter sets the property of the same name.
    public init(store: any SessionStore, replacing: [UInt8]?, session: @escaping @Sendable (Verified) async throws -> SignedInSession) {
        self.store = store
        self.replacing = replacing
        self.session = session
    }
}

extension SessionStore {
    /// Reads `kept`, ends every session of the account, then stores `kept` again.
    public func deleteSessions(userHandle: [UInt8], except kept: [UInt8]) async throws -> Int {
        let keep = try await session(idHash: kept).flatMap { $0.userHandle == userHandle ? $0 : nil }
        let ended = try await deleteSessions(userHandle: userHandle)
        guard let keep else { return ended }
        try await insert(keep)
        return max(0, ended - 1)
    }

    /// Deletes `old`, then inserts `session` (two writes).
    public func replace(_ old: [UInt8]?, with session: SignedInSession) async throws {
        if let old, old != session.idHash { try await delete(idHash: old) }
        try await insert(session)
    }

    /// Reads `old`, stores `session`, reads `old` again: gone, `session` is deleted and the
    /// answer is false; else `old` is deleted. (Not atomic: a store at its per-account cap may
    /// drop `old` to make room, and the replacement then fails.)
    public func replace(stored old: [UInt8], with session: SignedInSession) async throws -> Bool {
        func holds() async throws -> Bool { try await self.session(idHash: old).map { $0.userHandle == session.userHandle } ?? false }
        guard try await holds() else { return false }
        try await insert(session)
        guard try await holds() else {
            try await delete(idHash: session.idHash)
            return false
        }
        try await delete(idHash: old)
        return true
    }
}

/// The error of a registration whose account was deleted before its credential was stored.
package let accountDeleted = WebAuthnError(.accountUnknown, "the account was deleted; the credential was not stored")

/// The error of a registration for a user who holds `held` credentials, `limit` being the most allowed.
package func credentialLimit(held: Int, limit: Int) -> WebAuthnError {
    WebAuthnError(
        .credentialLimitReached, "the user holds \(held) credentials, the most this relying party allows (\(limit)); delete one to add another")
}
