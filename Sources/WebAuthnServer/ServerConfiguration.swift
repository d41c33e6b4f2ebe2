public import CoreMetrics
public import Foundation
public import Hummingbird
public import WebAuthnCore
public import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// What the HTTP layer serves besides the engine itself, with safe defaults:
/// a stranger can neither enroll onto an existing name, nor finish a ceremony
/// from another browser, nor tell real names from unknown ones, nor flood the
/// store.
public struct ServerConfiguration: Sendable {
    /// Origins listed in `/.well-known/webauthn` (WebAuthn L3 related origins); empty: not served.
    public var relatedOrigins: [String]
    /// App IDs (TEAMID.bundle.id) listed under `webcredentials` in
    /// `/.well-known/apple-app-site-association`; empty: not served.
    public var appleWebCredentialApps: [String]
    /// The largest request body accepted. Default 64 KiB.
    public var maxBodySize: Int
    /// Mark the session cookie `Secure` and name it with the `__Host-` prefix
    /// (set it when served over HTTPS, directly or behind a TLS proxy).
    public var secureCookies: Bool
    /// Mount the demo page and its API at `/` and `/demo/` in ``WebAuthnRoutes/add(to:atPath:)``.
    /// Default false: a host app asks for it (`webauthn serve` does, unless `--no-demo`).
    public var demo: Bool
    /// The server secret (32 to 1024 bytes): it signs session cookies and
    /// derives the stand-in credentials of unknown names. Instances behind
    /// one load balancer need the same secret; a restart with a new one
    /// signs everyone out and changes the stand-ins. Default: random per process.
    public var secret: [UInt8]
    /// The FIDO conformance tools' expectations instead of the safe defaults:
    /// any client may enroll onto an existing name, and request options for
    /// an unknown name fail. Never for a deployment. Default false.
    public var conformance: Bool
    /// Token buckets on the ceremony endpoints; nil turns throttling off.
    public var rateLimit: RateLimit?
    /// Proxies whose `X-Forwarded-For` is believed (the client address is
    /// the right-most address not in these ranges). Empty: the socket peer is the client.
    public var trustedProxies: [CIDR]
    /// How long a signed-in session lasts: 60 seconds to 400 days (``WebAuthnRoutes`` refuses
    /// another). Default 12 hours.
    public var sessionLifetime: TimeInterval
    /// The session cookie's name: 1 to 64 of `A-Z a-z 0-9 _ -`, not starting with `__`
    /// (`WebAuthnRoutes` stops the process otherwise). With ``secureCookies`` it is sent as
    /// `__Host-` and this name. Default `webauthn_session`; set another where the host's own
    /// cookies, or a second relying party on the same host, would share the name.
    public var sessionCookieName = "webauthn_session"
    /// Who may enroll a credential; see ``EnrollmentRequest``. Default
    /// ``EnrollmentRequest/signedInOwnerOrNewName(_:)``.
    public var mayEnroll: @Sendable (EnrollmentRequest) async -> Bool
    /// The host application's own sign-in, when it has one (a password, Sign
    /// in with Apple, ...): the user handle of the account the request is
    /// signed in as, or nil. Consulted before the routes' own passkey session.
    public var signedInAccount: (@Sendable (Request) async -> [UInt8]?)?
    /// Sign in with Apple (`/apple/...` routes), when configured; nil: off.
    public var apple: AppleConfiguration?
    /// How recently the signed-in account must have verified the user (a sign-in or
    /// re-authentication with user verification, or Sign in with Apple) for deleting a
    /// credential or the account, and for adding a passkey to an account that has one.
    /// Default 5 minutes; at least 30 seconds.
    public var reauthenticationWindow: TimeInterval
    /// The community passkey-provider list, for naming credentials (``ProviderNames``);
    /// loaded at run time (`webauthn serve --passkey-providers FILE|URL`), replaceable while the
    /// server runs. Default: an empty list.
    public var passkeyProviders: PasskeyProviderDirectory
    /// Where the ceremony routes count ceremonies by outcome and code, their durations,
    /// throttled requests and store errors (swift-metrics); nil: the process's `MetricsSystem`.
    /// ``buildApplication(engine:accounts:sessions:configuration:)`` sets its own when it serves `/metrics`.
    public var metricsFactory: (any MetricsFactory)?

    /// A configuration; each parameter defaults to its property's documented
    /// default. A nil `secret` draws 32 random bytes (a longer one is cut to 1024
    /// bytes), and `sessionLifetime` is at least 60 seconds.
    public init(
        relatedOrigins: [String] = [], appleWebCredentialApps: [String] = [], maxBodySize: Int = 64 * 1024,
        secureCookies: Bool = false, demo: Bool = false, secret: [UInt8]? = nil, conformance: Bool = false,
        rateLimit: RateLimit? = RateLimit(), trustedProxies: [CIDR] = [], sessionLifetime: TimeInterval = 12 * 3600,
        mayEnroll: @escaping @Sendable (EnrollmentRequest) async -> Bool = EnrollmentRequest.signedInOwnerOrNewName,
        signedInAccount: (@Sendable (Request) async -> [UInt8]?)? = nil, apple: AppleConfiguration? = nil,
        reauthenticationWindow: TimeInterval = 300, passkeyProviders: PasskeyProviderDirectory = PasskeyProviderDirectory(),
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.apple = apple
        self.reauthenticationWindow = max(30, reauthenticationWindow)
        self.passkeyProviders = passkeyProviders
        self.metricsFactory = metricsFactory
        self.relatedOrigins = relatedOrigins
        self.appleWebCredentialApps = appleWebCredentialApps
        self.maxBodySize = maxBodySize
        self.secureCookies = secureCookies
        self.demo = demo
        self.secret = secret.map { Array($0.prefix(1024)) } ?? SecureRandom.secret(32)
        self.conformance = conformance
        self.rateLimit = rateLimit
        self.trustedProxies = trustedProxies
        self.sessionLifetime = max(60, sessionLifetime)
        self.mayEnroll = mayEnroll
        self.signedInAccount = signedInAccount
    }
}

/// A request to enroll a credential, for the enrollment hook.
public struct EnrollmentRequest: Sendable {
    /// The user name asked for (normalised).
    public let name: String
    /// The account that has this name, if any.
    public let existingAccount: UserEntity?
    /// The account the request is signed in as, if any (the host's hook first, then the passkey session).
    public let signedInAs: [UInt8]?

    /// The default rule: a new name may be taken by anyone (the account is
    /// created only when the registration completes); an existing account
    /// takes new credentials only from a session signed in as it.
    @Sendable public static func signedInOwnerOrNewName(_ r: EnrollmentRequest) async -> Bool {
        guard let account = r.existingAccount else { return true }
        return r.signedInAs == account.id
    }

    /// Only signed-in accounts may add credentials; no sign-up through passkeys
    /// (for applications whose accounts come from elsewhere).
    @Sendable public static func signedInOwnerOnly(_ r: EnrollmentRequest) async -> Bool {
        guard let account = r.existingAccount else { return false }
        return r.signedInAs == account.id
    }
}

/// Token-bucket throttling of the ceremony endpoints (`/attestation/*`,
/// `/assertion/*`). Requests without a valid session cookie are counted per
/// client address (each would start a session and a pending ceremony: the
/// cheap flood); requests within a session per session. Each bucket holds
/// ten seconds' worth of its rate. Over the limit: HTTP 429 with `Retry-After`.
public struct RateLimit: Sendable, Equatable {
    /// Requests per second per client address without a session, and ceremony starts
    /// (options, Apple nonces and web flows) with a session, per address.
    /// Default 30 (burst 300).
    public var perAddress: Double
    /// Requests per second per session. Default 300 (burst 3000): a conformance
    /// runner keeping one cookie does not reach it; its pending ceremonies stay
    /// bounded by `PendingCeremony.maxPerBinding` anyway.
    public var perSession: Double
    /// The most buckets tracked; beyond it the oldest are forgotten. Default 100,000.
    public var maxTracked: Int

    /// Limits in requests per second (at least 0.01) and tracked buckets (at least 1).
    public init(perAddress: Double = 30, perSession: Double = 300, maxTracked: Int = 100_000) {
        self.perAddress = max(0.01, perAddress)
        self.perSession = max(0.01, perSession)
        self.maxTracked = max(1, maxTracked)
    }

    /// Parses `--rate-limit`: `off`, `A` or `A:S` (requests per second per address, and per session).
    package static func parse(_ text: String) -> RateLimit?? {
        if text == "off" { return .some(nil) }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map { Double($0) }
        guard (1...2).contains(parts.count), let a = parts[0], a > 0, a.isFinite else { return nil }
        var limit = RateLimit(perAddress: a)
        if parts.count == 2 {
            guard let s = parts[1], s > 0, s.isFinite else { return nil }
            limit.perSession = s
        }
        return .some(limit)
    }
}
