public import Foundation

/// A verified Apple identity token: who signed in, for which client id, and
/// what Apple says about the account.
public struct AppleIdentityToken: Sendable, Equatable {
    /// The user's stable identifier for the team (`sub`): the account key, never the email.
    public let sub: String
    /// The client id the token was issued to (`aud`), one of the configured ones.
    public let audience: String
    /// The email address (`email`), possibly a private relay address; often absent after first sign-in.
    public let email: String?
    /// `email_verified`, given as a boolean or the string `"true"`/`"false"`; `nil` when absent.
    public let emailVerified: Bool?
    /// `is_private_email` (a private relay address), in either form; `nil` when absent.
    public let isPrivateEmail: Bool?
    /// `real_user_status`, kept as Apple sent it; `nil` when absent or not an integer.
    public let realUserStatus: AppleRealUserStatus?
    /// `transfer_sub`: the user's identifier under the previous team, during an app transfer.
    public let transferSub: String?
    /// `iat`.
    public let issuedAt: Date
    /// `exp`.
    public let expiresAt: Date
    /// `nonce_supported`, in either form; `nil` when absent. The nonce check does not read it.
    public let nonceSupported: Bool?
    /// `auth_time`, when present.
    public let authenticatedAt: Date?
    /// `nonce`, as the token carries it (the issued nonce or its SHA-256 in hex), when present
    /// (at most 256 bytes). A server that issued several nonces finds the one to consume by it.
    public let nonce: String?
}

/// Apple's judgement of whether the user is a real person (`real_user_status`).
/// Values other than the three known ones are kept, never refused.
public struct AppleRealUserStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The integer Apple sent.
    public let rawValue: Int
    /// Wraps any integer.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// 0: not supported on the user's platform (only iOS 14 and later report).
    public static let unsupported = AppleRealUserStatus(rawValue: 0)
    /// 1: the system cannot tell.
    public static let unknown = AppleRealUserStatus(rawValue: 1)
    /// 2: the user is likely real.
    public static let likelyReal = AppleRealUserStatus(rawValue: 2)
    /// The integer, as text.
    public var description: String { String(rawValue) }
}
