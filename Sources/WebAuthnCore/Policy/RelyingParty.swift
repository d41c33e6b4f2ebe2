public import Foundation
public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The configuration of one relying party: who it is, which origins may
/// speak for it, its policies and its clock. A value: build one at start-up
/// and share it.
public struct RelyingParty: Sendable {
    /// The RP ID: a registrable domain such as `example.com`.
    public let id: String
    /// The human-readable name shown by authenticators.
    public let name: String
    /// Exact origins allowed in client data: web origins (`https://example.com`,
    /// `https://login.example.com:8443`) and Android app origins
    /// (`android:apk-key-hash:<base64url>`).
    public let origins: [String]
    /// Every verification policy (user verification, cross-origin, counter, algorithms, attestation).
    public let policy: VerificationPolicy
    /// The source of "now" for challenge expiry and certificate validity. Default ``WebAuthnClock/system``.
    public let clock: WebAuthnClock
    /// How long an issued challenge stays valid. Default 5 minutes.
    public let challengeLifetime: TimeInterval
    /// Attestation trust anchors. Default: the roots that ship with the engine.
    /// (``WebAuthnEngine/relyingParty`` carries the anchors installed in the engine now.)
    public internal(set) var trustAnchors: TrustAnchors
    /// SHA-256 of the RP ID, computed once.
    public let rpIdHash: [UInt8]

    /// Throws `configuration_invalid` if the RP ID or an origin is malformed.
    public init(
        id: String,
        name: String? = nil,
        origins: [String],
        policy: VerificationPolicy = VerificationPolicy(),
        clock: WebAuthnClock = .system,
        challengeLifetime: TimeInterval = 300,
        trustAnchors: TrustAnchors = .builtIn
    ) throws(WebAuthnError) {
        guard !id.isEmpty, id.utf8.count <= 253, !id.contains("/"), !id.contains(":"), id == id.lowercased() else {
            throw WebAuthnError(.configurationInvalid, "RP ID \"\(id)\" is not a lowercase domain name")
        }
        guard !origins.isEmpty else {
            throw WebAuthnError(.configurationInvalid, "at least one origin is required")
        }
        for origin in origins {
            guard Self.isValidOrigin(origin) else {
                throw WebAuthnError(.configurationInvalid, "\"\(origin)\" is not an origin (scheme://host[:port] with no path, or android:apk-key-hash:…)")
            }
        }
        if case .allowTopOrigins(let tops) = policy.crossOrigin {
            for top in tops where !Self.isValidOrigin(top) {
                throw WebAuthnError(.configurationInvalid, "top origin \"\(top)\" is not an origin")
            }
        }
        guard challengeLifetime > 0 else {
            throw WebAuthnError(.configurationInvalid, "the challenge lifetime must be positive")
        }
        self.id = id
        self.name = name ?? id
        self.origins = origins
        self.policy = policy
        self.clock = clock
        self.challengeLifetime = challengeLifetime
        self.trustAnchors = trustAnchors
        self.rpIdHash = Digest.sha256(Array(id.utf8))
    }

    static func isValidOrigin(_ origin: String) -> Bool {
        if origin.hasPrefix("android:apk-key-hash:") {
            let hash = origin.dropFirst("android:apk-key-hash:".count)
            return !hash.isEmpty && Base64URL.decode(String(hash)) != nil
        }
        guard let components = URLComponents(string: origin), let scheme = components.scheme,
            scheme == "https" || scheme == "http", let host = components.host, !host.isEmpty
        else { return false }
        return (components.path.isEmpty) && components.query == nil && components.fragment == nil
            && components.user == nil && !origin.hasSuffix("/")
    }
}
