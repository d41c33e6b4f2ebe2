import WebAuthnCore

/// What the HTTP layer serves besides the engine itself.
public struct ServerConfiguration: Sendable {
    /// Origins listed in `/.well-known/webauthn` (WebAuthn L3 related origins); empty: not served.
    public var relatedOrigins: [String]
    /// App IDs (TEAMID.bundle.id) listed under `webcredentials` in
    /// `/.well-known/apple-app-site-association`; empty: not served.
    public var appleWebCredentialApps: [String]
    /// The largest request body accepted. Default 64 KiB.
    public var maxBodySize: Int
    /// Mark the session cookie `Secure` (set it when served over HTTPS).
    public var secureCookies: Bool
    /// Serve the demo page and its API at `/` and `/demo/`. Default true.
    public var demo: Bool

    public init(relatedOrigins: [String] = [], appleWebCredentialApps: [String] = [], maxBodySize: Int = 64 * 1024,
                secureCookies: Bool = false, demo: Bool = true) {
        self.relatedOrigins = relatedOrigins
        self.appleWebCredentialApps = appleWebCredentialApps
        self.maxBodySize = maxBodySize
        self.secureCookies = secureCookies
        self.demo = demo
    }
}
