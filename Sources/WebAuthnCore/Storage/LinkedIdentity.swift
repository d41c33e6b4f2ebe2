public import Foundation
internal import Synchronization
internal import _WebAuthnEncoding

/// An account's sign-in through another provider, such as Sign in with Apple:
/// the provider's stable subject for the user, linked to the account's handle.
/// An account may hold passkeys and linked identities side by side.
public struct LinkedIdentity: Sendable, Equatable {
    /// The provider, such as `apple`.
    public let provider: String
    /// The provider's stable identifier of the user (Apple's `sub`): the key, never the email.
    public let subject: String
    /// The account it signs in to.
    public let userHandle: [UInt8]
    /// The email the provider last reported, if any (a private relay address is an email too).
    public var email: String?
    /// Whether the provider says the email is verified; nil when it did not say.
    public var emailVerified: Bool?
    /// Whether the email is a private relay address; nil when the provider did not say.
    public var isPrivateEmail: Bool?
    /// Whether the provider delivers mail sent to `email`: false after Apple's `email-disabled`
    /// (the user stopped the private relay forwarding this site's mail), true after
    /// `email-enabled`; nil until the provider says. Send no mail to an address it is false for.
    public var emailEnabled: Bool?
    /// When the provider dated the last email change applied (`email-enabled`, `email-disabled`);
    /// nil before any. An email change dated before it is older news, delivered late, and changes
    /// nothing.
    public var emailChangedAt: Date?
    /// The provider's refresh token, as the server sealed it (opaque bytes), for revocation.
    public var refreshToken: [UInt8]?
    /// When the link was made.
    public let createdAt: Date
    /// When the link was last made, signed in with, or moved to this subject: a revocation or
    /// deletion the provider dates before it concerns an earlier consent. Email changes the
    /// provider reports do not move it (a revocation dated after the sign-in must still apply).
    public var updatedAt: Date

    /// A link of `subject` at `provider` to the account `userHandle`.
    public init(
        provider: String, subject: String, userHandle: [UInt8], email: String? = nil, emailVerified: Bool? = nil,
        isPrivateEmail: Bool? = nil, emailEnabled: Bool? = nil, emailChangedAt: Date? = nil, refreshToken: [UInt8]? = nil, createdAt: Date,
        updatedAt: Date? = nil
    ) {
        self.provider = provider
        self.subject = subject
        self.userHandle = userHandle
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.emailEnabled = emailEnabled
        self.emailChangedAt = emailChangedAt
        self.refreshToken = refreshToken
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
    }

    /// The longest provider name and subject stored (Apple's `sub` is about 44 characters).
    public static let maxFieldLength = 255
}

/// Where linked identities live, next to the accounts they sign in to.
///
/// Contract (``AccountStore``'s contract tests hold every implementation to it):
/// - `(provider, subject)` is unique: one subject signs in to one account.
/// - `create(_:firstIdentity:)` creates the account and its first identity
///   atomically, or neither (`username_unavailable`, `identity_already_linked`).
/// - `link(_:)` adds an identity to an existing account (`account_unknown`,
///   `identity_already_linked`); `relink` moves a link to a new subject (Apple's
///   `transfer_sub`) in one step; `unlink` removes it and returns what it removed.
public protocol LinkedIdentityStore: Sendable {
    /// The identity of `subject` at `provider`, if linked.
    func identity(provider: String, subject: String) async throws -> LinkedIdentity?
    /// The account's linked identities, oldest first.
    func identities(forUser userHandle: [UInt8]) async throws -> [LinkedIdentity]
    /// Creates `user` with its first identity: both, or nothing.
    func create(_ user: UserEntity, firstIdentity: LinkedIdentity) async throws
    /// Links an identity to its (existing) account.
    func link(_ identity: LinkedIdentity) async throws
    /// Replaces the identity's email fields (`email`, `emailVerified`, `isPrivateEmail`,
    /// `emailEnabled`, `emailChangedAt`), refresh token and `updatedAt`; false when it is not linked.
    func update(_ identity: LinkedIdentity) async throws -> Bool
    /// Replaces the identity's email fields, refresh token and `updatedAt` only while its stored
    /// refresh token is still `expected`, as one step (a compare-and-set); false when it is not
    /// linked or its refresh token changed since it was read: read it again and apply the change
    /// to what was read. Two sign-ins through different client ids, each writing back the tokens
    /// it had read, otherwise lose one of them.
    func update(_ identity: LinkedIdentity, ifRefreshTokenIs expected: [UInt8]?) async throws -> Bool
    /// Moves the link of `subject` to `newSubject` (same account); false when `subject` is not linked.
    func relink(provider: String, subject: String, to newSubject: String, at date: Date) async throws -> Bool
    /// Removes the link and returns it; nil when it was not linked.
    func unlink(provider: String, subject: String) async throws -> LinkedIdentity?
    /// Removes the link only while its stored refresh token is still `expected`, as one step, and
    /// returns it; nil when it is not linked or its token changed since it was read (a sign-in
    /// came between: read it again and judge again). For acting on what was read, as Apple's
    /// `consent-revoked` does when it is not older than the identity's last sign-in.
    func unlink(provider: String, subject: String, ifRefreshTokenIs expected: [UInt8]?) async throws -> LinkedIdentity?
}

extension LinkedIdentityStore {
    /// Reads the identity, compares its refresh token, then updates it: not one step, so a write
    /// in between is lost. A store written before this requirement gets it; stores that can
    /// compare and write in one statement or under one lock (the SQLite, PostgreSQL and in-memory
    /// stores) implement it so.
    public func update(_ identity: LinkedIdentity, ifRefreshTokenIs expected: [UInt8]?) async throws -> Bool {
        guard let current = try await self.identity(provider: identity.provider, subject: identity.subject), current.refreshToken == expected else {
            return false
        }
        return try await update(identity)
    }

    /// Reads the identity, compares its refresh token, then unlinks it: not one step, so a write
    /// in between is lost with it. Stores that can (the SQLite, PostgreSQL and in-memory stores)
    /// implement it as one.
    public func unlink(provider: String, subject: String, ifRefreshTokenIs expected: [UInt8]?) async throws -> LinkedIdentity? {
        guard let current = try await identity(provider: provider, subject: subject), current.refreshToken == expected else { return nil }
        return try await unlink(provider: provider, subject: subject)
    }
}

extension LinkedIdentity {
    /// Refuses fields no provider sends (empty, too long, or with control characters).
    package func validate() throws(WebAuthnError) {
        for (name, value) in [("provider", provider), ("subject", subject)] {
            guard !value.isEmpty, value.utf8.count <= Self.maxFieldLength,
                !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw WebAuthnError(
                    .identityInvalid, "the linked identity's \(name) is empty, longer than \(Self.maxFieldLength) bytes or has control characters")
            }
        }
        if let email, email.utf8.count > 320 || email.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw WebAuthnError(.identityInvalid, "the linked identity's email is longer than 320 bytes or has control characters")
        }
    }

    package static func alreadyLinked(_ provider: String) -> WebAuthnError {
        WebAuthnError(.identityAlreadyLinked, "this \(provider.prefix(32)) identity is already linked to an account")
    }

    package static func unknownAccount() -> WebAuthnError {
        WebAuthnError(.accountUnknown, "there is no such account")
    }
}
