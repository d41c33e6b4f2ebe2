public import Foundation
public import WebAuthnCore
internal import _WebAuthnEncoding
package import _WebAuthnCrypto

/// What a server needs to know to accept Sign in with Apple: the client ids
/// tokens may be issued to, and (for code exchange, refresh and revocation)
/// the team's Sign in with Apple key.
public struct SignInWithAppleConfiguration: Sendable {
    /// The issuer of every identity token and notification, and the audience of every client secret.
    public static let issuer = "https://appleid.apple.com"

    /// The client ids tokens are accepted for: the apps' bundle IDs (native sign-in) and
    /// the Services ID of the web flow. Compared byte for byte, case-sensitively.
    public var clientIDs: [String]
    /// The team's key for the client secret; `nil` when the server only verifies tokens.
    public var credentials: AppleClientCredentials?
    /// Where Apple's endpoints are (`/auth/keys`, `/auth/token`, `/auth/revoke`);
    /// tests point it at a stand-in. The `iss` checked stays ``issuer``.
    public var baseURL: URL
    /// How far `exp` and `iat` may be off the clock: 60 seconds by default, at most 300.
    public var leeway: TimeInterval
    /// How long a client secret is valid: one hour by default, capped at ``maxClientSecretLifetime``.
    public var clientSecretLifetime: TimeInterval
    /// The timeout of each request to Apple, in seconds (10 by default).
    public var requestTimeout: TimeInterval

    /// Apple refuses client secrets valid for more than 15,777,000 seconds; the cap stays 180 days.
    public static let maxClientSecretLifetime: TimeInterval = 15_552_000

    /// Apple's real endpoints.
    public static let defaultBaseURL = URL(string: "https://appleid.apple.com")!

    /// A configuration; throws `configuration_invalid` for no client id, an empty one,
    /// a leeway outside 0...300 s or a client secret lifetime outside 60 s...180 days.
    public init(
        clientIDs: [String], credentials: AppleClientCredentials? = nil, baseURL: URL = Self.defaultBaseURL,
        leeway: TimeInterval = 60, clientSecretLifetime: TimeInterval = 3600, requestTimeout: TimeInterval = 10
    ) throws(WebAuthnError) {
        guard !clientIDs.isEmpty, clientIDs.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 255 }) else {
            throw WebAuthnError(.configurationInvalid, "Sign in with Apple needs at least one client id (1 to 255 bytes each)")
        }
        guard (0...300).contains(leeway) else { throw WebAuthnError(.configurationInvalid, "the leeway must be 0 to 300 seconds; got \(leeway)") }
        guard (60...Self.maxClientSecretLifetime).contains(clientSecretLifetime) else {
            throw WebAuthnError(.configurationInvalid, "the client secret lifetime must be 60 s to 180 days; got \(clientSecretLifetime)")
        }
        guard (1...120).contains(requestTimeout) else {
            throw WebAuthnError(.configurationInvalid, "the request timeout must be 1 to 120 seconds; got \(requestTimeout)")
        }
        guard let scheme = baseURL.scheme?.lowercased(), scheme == "https" || scheme == "http", baseURL.host != nil else {
            throw WebAuthnError(.configurationInvalid, "the Apple base URL must be an http(s) URL with a host; got \(baseURL)")
        }
        self.clientIDs = clientIDs
        self.credentials = credentials
        self.baseURL = baseURL
        self.leeway = leeway
        self.clientSecretLifetime = clientSecretLifetime
        self.requestTimeout = requestTimeout
    }

    /// `<baseURL>/auth/<name>`.
    func endpoint(_ name: String) -> URL {
        baseURL.appendingPathComponent("auth").appendingPathComponent(name)
    }
}

/// The team's Sign in with Apple key, which signs the client secret.
public struct AppleClientCredentials: Sendable {
    /// The team id (the client secret's `iss`), e.g. `ABCDE12345`.
    public var teamID: String
    /// The key id Apple shows for the key (the client secret header's `kid`).
    public var keyID: String
    /// The private key.
    public var privateKey: ApplePrivateKey

    /// Credentials; throws `configuration_invalid` for an empty team or key id.
    public init(teamID: String, keyID: String, privateKey: ApplePrivateKey) throws(WebAuthnError) {
        guard !teamID.isEmpty, teamID.utf8.count <= 64, !keyID.isEmpty, keyID.utf8.count <= 64 else {
            throw WebAuthnError(.configurationInvalid, "the team id and key id must be 1 to 64 bytes")
        }
        self.teamID = teamID
        self.keyID = keyID
        self.privateKey = privateKey
    }
}

/// A Sign in with Apple private key: the `.p8` file Apple lets you download
/// once, a PKCS#8 PEM of a P-256 key. Opaque; it never leaves the process.
public struct ApplePrivateKey: Sendable {
    package let key: SigningKey

    /// Reads the `.p8` PEM text. Throws `configuration_invalid` when it is not a P-256 private key.
    public init(pem: String) throws(WebAuthnError) {
        guard pem.utf8.count <= 16 * 1024 else { throw WebAuthnError(.configurationInvalid, "the .p8 key is over 16 KiB") }
        // An encrypted PEM would make OpenSSL ask for a passphrase on the terminal; Apple's .p8 files are not encrypted.
        guard !pem.contains("ENCRYPTED") else { throw WebAuthnError(.configurationInvalid, "the .p8 key is encrypted; give the key as Apple issued it") }
        let key: SigningKey
        do {
            key = try SigningKey(pem: pem, algorithm: .es256)
        } catch {
            throw WebAuthnError(.configurationInvalid, "the Sign in with Apple key is not a PEM private key (\(error.message))")
        }
        _ = try Self.publicKey(of: key)  // P-256 only
        self.key = key
    }

    package init(signingKey: SigningKey) { self.key = signingKey }

    /// The public key, as OpenSSL checks it (P-256 only).
    package static func publicKey(of key: SigningKey) throws(WebAuthnError) -> PublicKey {
        guard case .map(let pairs)? = try? key.coseKey() else { throw WebAuthnError(.configurationInvalid, "not an EC key") }
        var x: [UInt8]?, y: [UInt8]?
        for pair in pairs {
            if pair.key == CBOR(-2), case .bytes(let b) = pair.value { x = b }
            if pair.key == CBOR(-3), case .bytes(let b) = pair.value { y = b }
        }
        guard let x, let y, x.count == 32, y.count == 32 else {
            throw WebAuthnError(.configurationInvalid, "the Sign in with Apple key is not a P-256 key")
        }
        return try PublicKey.ec(curve: .p256, x: x, y: y)
    }

    /// The public key's DER SubjectPublicKeyInfo (what a stand-in registers to check client secrets).
    public func publicKeyDER() throws(WebAuthnError) -> [UInt8] {
        try Self.publicKey(of: key).subjectPublicKeyInfo
    }
}
