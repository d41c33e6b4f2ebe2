public import Foundation
public import WebAuthnCore
public import SignInWithApple
import Synchronization
package import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// A stand-in for Apple's Sign in with Apple endpoints, for tests, served on
/// 127.0.0.1 (``start()``): `GET /auth/keys` (its own RSA keys, rotatable),
/// `POST /auth/token` (checks the client secret as Apple does; single-use
/// authorization codes valid 5 minutes; refresh tokens), `POST /auth/revoke`
/// (recorded), `GET /auth/authorize` (an auto-submitting `form_post` back to
/// `redirect_uri`). It also mints identity tokens with any claims, and broken ones.
public final class AppleStandIn: Sendable {
    /// A user of the stand-in.
    public struct User: Sendable {
        /// `sub`.
        public var sub: String
        /// `email`, if the token should carry one.
        public var email: String?
        /// `is_private_email`.
        public var isPrivateEmail: Bool
        /// `real_user_status`.
        public var realUserStatus: Int
        /// The name sent in `user` on first consent (web flow).
        public var firstName: String
        /// See ``firstName``.
        public var lastName: String

        /// A user; `sub` is random when not given.
        public init(
            sub: String? = nil, email: String? = "user@example.com", isPrivateEmail: Bool = false, realUserStatus: Int = 2,
            firstName: String = "Test", lastName: String = "User"
        ) {
            self.sub = sub ?? "000123." + Bytes.hex(SecureRandom.bytes(16)) + ".0042"
            self.email = email
            self.isPrivateEmail = isPrivateEmail
            self.realUserStatus = realUserStatus
            self.firstName = firstName
            self.lastName = lastName
        }
    }

    /// A call to `/auth/revoke` that passed the client check.
    public struct Revocation: Sendable, Equatable {
        /// `client_id`.
        public let clientID: String
        /// `token`.
        public let token: String
        /// `token_type_hint`, if sent.
        public let tokenTypeHint: String?

        /// A revocation, to compare with ``AppleStandIn/revocations``.
        public init(clientID: String, token: String, tokenTypeHint: String?) {
            self.clientID = clientID
            self.token = token
            self.tokenTypeHint = tokenTypeHint
        }
    }

    /// Ways to break an identity token, for tests of the verifier.
    public enum Defect: Sendable, CaseIterable {
        /// `alg: none` and no signature.
        case algorithmNone
        /// HS256 with the stand-in's public key (DER) as the HMAC key: the classic algorithm confusion.
        case hs256WithPublicKey
        /// Signed ES256 with a P-256 key.
        case es256
        /// No `kid` in the header.
        case noKid
        /// A `kid` no key of the set has.
        case unknownKid
        /// A `crit` header member.
        case crit
        /// The payload changed after signing (the `sub`).
        case editedPayload
        /// Signed by an RSA key the set does not have, under the current `kid`.
        case wrongKey
    }

    struct Code {
        let user: User
        let clientID: String
        let redirectURI: String?
        let nonce: String?
        let expires: Date
        var used: Bool
    }

    struct RefreshToken {
        let user: User
        let clientID: String
        var revoked: Bool
    }

    struct State {
        var keys: [(kid: String, key: SigningKey)]
        var codes: [String: Code] = [:]
        var refreshTokens: [String: RefreshToken] = [:]
        var revocations: [Revocation] = []
        var keySetRequests = 0
        var codeExchanges = 0
        var revokeRefusal: String?
        var exchangeAudience: String?
        var keysAvailable = true
        var authorizeUser = User()
        var firstConsent = true
        var server: LoopbackHTTPServer?
    }

    /// The client ids the stand-in knows (bundle IDs and Services IDs).
    public let clientIDs: [String]
    /// The team id client secrets must carry as `iss`.
    public let teamID: String
    /// The key id client secrets must name in `kid`.
    public let keyID: String
    let clientKey: PublicKey
    let clock: WebAuthnClock
    let state: Mutex<State>

    /// A stand-in that accepts client secrets signed by `credentials` for `clientIDs`.
    public init(credentials: AppleClientCredentials, clientIDs: [String], clock: WebAuthnClock = .system) throws {
        self.clientIDs = clientIDs
        self.teamID = credentials.teamID
        self.keyID = credentials.keyID
        self.clientKey = try ApplePrivateKey.publicKey(of: credentials.privateKey.key)
        self.clock = clock
        self.state = Mutex(State(keys: [(Self.newKeyID(), try SigningKey.generate(.rs256))]))
    }

    /// New credentials with a fresh P-256 key, as a developer account would download them.
    public static func makeCredentials(teamID: String = "TEAM123456", keyID: String = "KEY1234567") throws -> AppleClientCredentials {
        try AppleClientCredentials(teamID: teamID, keyID: keyID, privateKey: ApplePrivateKey(signingKey: try SigningKey.generate(.es256)))
    }

    static func newKeyID() -> String { "standin-" + Bytes.hex(SecureRandom.bytes(5)) }

    // MARK: Keys

    /// The `kid` identity tokens are signed with now.
    public var currentKeyID: String { state.withLock { $0.keys[0].kid } }

    /// Makes a new signing key current; the old ones stay in the set unless `dropOld`. Returns its `kid`.
    @discardableResult
    public func rotateKeys(dropOld: Bool = false) throws -> String {
        let key = try SigningKey.generate(.rs256)
        let kid = Self.newKeyID()
        state.withLock { s in
            if dropOld { s.keys.removeAll() }
            s.keys.insert((kid, key), at: 0)
        }
        return kid
    }

    /// The key set, as `/auth/keys` serves it.
    public var keySetJSON: String { keySet().serialized() }

    /// The public half of an RSA signing key.
    static func rsaPublicKey(_ key: SigningKey) -> PublicKey? {
        guard case .map(let pairs) = (try? key.coseKey()) ?? .null else { return nil }
        var n: [UInt8] = [], e: [UInt8] = []
        for p in pairs {
            if p.key == CBOR(-1), case .bytes(let b) = p.value { n = b }
            if p.key == CBOR(-2), case .bytes(let b) = p.value { e = b }
        }
        return try? PublicKey.rsa(n: n, e: e)
    }

    package func keySet() -> JSONValue {
        let keys = state.withLock { $0.keys }
        return [
            "keys": .array(
                keys.map { entry in
                    guard case .map(let pairs) = (try? entry.key.coseKey()) ?? .null else { return .null }
                    var n: [UInt8] = [], e: [UInt8] = []
                    for p in pairs {
                        if p.key == CBOR(-1), case .bytes(let b) = p.value { n = b }
                        if p.key == CBOR(-2), case .bytes(let b) = p.value { e = b }
                    }
                    return [
                        "kty": "RSA", "kid": .string(entry.kid), "use": "sig", "alg": "RS256",
                        "n": .string(Base64URL.encode(n)), "e": .string(Base64URL.encode(e)),
                    ]
                })
        ]
    }

    /// Whether `/auth/keys` answers (false: HTTP 503).
    public var keysAvailable: Bool {
        get { state.withLock { $0.keysAvailable } }
        set { state.withLock { $0.keysAvailable = newValue } }
    }

    /// How many times `/auth/keys` was asked.
    public var keySetRequests: Int { state.withLock { $0.keySetRequests } }

    /// The OAuth error `/auth/revoke` answers every request with (HTTP 400), such as
    /// `invalid_client`; nil (the default): it revokes and answers 200, as Apple does, for a
    /// token it knows or not.
    public var revokeRefusal: String? {
        get { state.withLock { $0.revokeRefusal } }
        set { state.withLock { $0.revokeRefusal = newValue } }
    }

    /// The `aud` of the identity token a code exchange answers with; nil (the default): the
    /// client the code was exchanged for, as Apple writes it. For testing a client that must
    /// check the answer is addressed to it.
    public var exchangeAudience: String? {
        get { state.withLock { $0.exchangeAudience } }
        set { state.withLock { $0.exchangeAudience = newValue } }
    }

    /// How many times `/auth/token` was asked to exchange an authorization code (the client check passed).
    public var codeExchanges: Int { state.withLock { $0.codeExchanges } }

    /// The calls to `/auth/revoke` that passed the client check, in order.
    public var revocations: [Revocation] { state.withLock { $0.revocations } }

    // MARK: Tokens

    /// The claims of an identity token for `user`, as Apple writes them.
    package func claims(for user: User, audience: String, nonce: String?, issuedAt: Date? = nil, lifetime: TimeInterval = 86_400) -> JSONObject {
        let iat = (issuedAt ?? clock.now()).timeIntervalSince1970.rounded(.down)
        var c: JSONObject = [
            "iss": .string(SignInWithAppleConfiguration.issuer), "aud": .string(audience), "exp": .number(iat + lifetime), "iat": .number(iat),
            "sub": .string(user.sub), "c_hash": "dGVzdA", "auth_time": .number(iat), "nonce_supported": true,
            "real_user_status": .number(Double(user.realUserStatus)),
        ]
        if let nonce { c["nonce"] = .string(nonce) }
        if let email = user.email {
            c["email"] = .string(email)
            c["email_verified"] = true
            c["is_private_email"] = .bool(user.isPrivateEmail)
        }
        return c
    }

    /// An identity token for `user`, signed with the current key.
    public func identityToken(for user: User, audience: String, nonce: String? = nil, issuedAt: Date? = nil, lifetime: TimeInterval = 86_400) -> String {
        sign(.object(claims(for: user, audience: audience, nonce: nonce, issuedAt: issuedAt, lifetime: lifetime)))
    }

    /// A token with exactly these claims (JSON text, sent as written: duplicate members and all),
    /// signed RS256 with the current key, or broken by `defect`.
    public func token(claimsJSON: String, defect: Defect? = nil) -> String {
        sign(payload: Array(claimsJSON.utf8), defect: defect)
    }

    package func sign(_ claims: JSONValue, header extra: JSONObject = [:], defect: Defect? = nil) -> String {
        sign(payload: claims.serializedBytes(), header: extra, defect: defect)
    }

    package func sign(payload: [UInt8], header extra: JSONObject = [:], defect: Defect? = nil) -> String {
        let (kid, key) = state.withLock { $0.keys[0] }
        var header: JSONObject = ["kid": .string(kid), "alg": "RS256"]
        for m in extra.members { header[m.key] = m.value }
        var signer: (([UInt8]) -> [UInt8])? = { (try? key.sign($0)) ?? [] }
        switch defect {
        case nil: break
        case .algorithmNone?: header["alg"] = "none"; signer = nil
        case .hs256WithPublicKey?:
            header["alg"] = "HS256"
            let secret = Self.rsaPublicKey(key)?.subjectPublicKeyInfo ?? []
            signer = { Digest.hmacSHA256(key: secret, $0) }
        case .es256?:
            header["alg"] = "ES256"
            let ec = try? SigningKey.generate(.es256)
            signer = { input in ((try? ec?.sign(input)) ?? nil).flatMap { try? ECDSASignature.raw(fromDER: $0, coordinateSize: 32) } ?? [] }
        case .noKid?: header["kid"] = nil
        case .unknownKid?: header["kid"] = .string(Self.newKeyID())
        case .crit?: header["crit"] = .array(["exp"])
        case .wrongKey?:
            let other = try? SigningKey.generate(.rs256)
            signer = { (try? other?.sign($0)) ?? [] }
        case .editedPayload?: break
        }
        let input = Base64URL.encode(JSONValue.object(header).serializedBytes()) + "." + Base64URL.encode(payload)
        let signature = signer.map { $0(Array(input.utf8)) } ?? []
        guard defect == .editedPayload else { return input + "." + Base64URL.encode(signature) }
        // Re-encode the payload with a changed sub, keeping the signature over the original.
        var edited = (try? JSONValue.parse(payload).objectValue) ?? JSONObject()
        edited["sub"] = .string("attacker")
        return Base64URL.encode(JSONValue.object(header).serializedBytes()) + "." + Base64URL.encode(JSONValue.object(edited).serializedBytes())
            + "." + Base64URL.encode(signature)
    }

    // MARK: Codes and the web flow

    /// A single-use authorization code for `user` and `clientID`, valid 5 minutes.
    public func authorizationCode(for user: User, clientID: String, redirectURI: String? = nil, nonce: String? = nil) -> String {
        let code = "c" + Bytes.hex(SecureRandom.bytes(16)) + ".0.standin"
        let expires = clock.now().addingTimeInterval(300)
        state.withLock { $0.codes[code] = Code(user: user, clientID: clientID, redirectURI: redirectURI, nonce: nonce, expires: expires, used: false) }
        return code
    }

    /// The user `/auth/authorize` signs in, and whether it is their first consent (then `user` is posted).
    public func setAuthorizeUser(_ user: User, firstConsent: Bool = true) {
        state.withLock {
            $0.authorizeUser = user; $0.firstConsent = firstConsent
        }
    }

    // MARK: Serving

    /// Starts serving on 127.0.0.1 on a free port and returns the port.
    @discardableResult
    public func start() throws -> Int {
        let server = try LoopbackHTTPServer { [weak self] request in
            self?.handle(request) ?? .json(503, #"{"error":"stopped"}"#)
        }
        state.withLock { $0.server = server }
        return server.port
    }

    /// The port, once started.
    public var port: Int? { state.withLock { $0.server?.port } }

    /// `http://127.0.0.1:<port>`, once started: the base URL for ``SignInWithAppleConfiguration``.
    public var baseURL: URL? { port.flatMap { URL(string: "http://127.0.0.1:\($0)") } }

    /// Stops serving.
    public func stop() {
        let server = state.withLock { s -> LoopbackHTTPServer? in
            defer { s.server = nil }
            return s.server
        }
        server?.stop()
    }

    deinit { state.withLock { $0.server }?.stop() }
}
