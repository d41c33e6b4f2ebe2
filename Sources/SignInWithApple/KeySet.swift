public import WebAuthnCore
internal import _WebAuthnEncoding
package import _WebAuthnCrypto

/// Apple's public keys (a JWKS, RFC 7517), as `https://appleid.apple.com/auth/keys` serves them.
///
/// Keys are found by `kid`. A set may hold keys this library cannot use (another
/// `kty`, `use` or `alg`, or RSA under 2048 bits): they are kept as unusable, so a
/// token naming one fails with `apple_key_invalid` rather than the whole set failing.
public struct AppleKeySet: Sendable {
    /// The largest key set accepted, in bytes (Apple's is about 1.5 KiB).
    public static let maxSize = 64 * 1024
    /// The most keys a set may hold.
    public static let maxKeys = 64

    enum Entry: Sendable {
        case usable(PublicKey)
        case unusable(String)
    }

    let entries: [(kid: String, entry: Entry)]

    /// The key ids of the set, in order.
    public var keyIDs: [String] { entries.map(\.kid) }

    /// Parses a JWKS with the engine's strict JSON parser. Throws `apple_jwks_invalid`.
    public init(json: [UInt8]) throws(WebAuthnError) {
        guard json.count <= Self.maxSize else {
            throw WebAuthnError(.appleJWKSInvalid, "the key set is \(json.count) bytes; the limit is \(Self.maxSize)")
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse(json, limits: JSONLimits(maxBytes: Self.maxSize, maxDepth: 8))
        } catch {
            throw WebAuthnError(.appleJWKSInvalid, "the key set is not JSON: \(error.message)")
        }
        guard let keys = value["keys"]?.arrayValue else { throw WebAuthnError(.appleJWKSInvalid, "the key set has no \"keys\" array") }
        guard keys.count <= Self.maxKeys else { throw WebAuthnError(.appleJWKSInvalid, "the key set has \(keys.count) keys; the limit is \(Self.maxKeys)") }
        var entries: [(kid: String, entry: Entry)] = []
        for key in keys {
            guard let jwk = key.objectValue else { throw WebAuthnError(.appleJWKSInvalid, "a key of the set is not an object") }
            // A key without a kid can never be selected (tokens without kid are refused): skip it.
            guard let kidValue = jwk["kid"] else { continue }
            guard let kid = kidValue.stringValue, !kid.isEmpty else { throw WebAuthnError(.appleJWKSInvalid, "a key's kid is not a non-empty string") }
            guard !entries.contains(where: { Bytes.sameUTF8($0.kid, kid) }) else {
                throw WebAuthnError(.appleJWKSInvalid, "two keys of the set have kid \"\(kid.prefix(64))\"")
            }
            entries.append((kid, Self.entry(jwk)))
        }
        self.entries = entries
    }

    /// Reads one JWK; what cannot verify RS256 is unusable, with the reason.
    static func entry(_ jwk: JSONObject) -> Entry {
        guard let kty = jwk["kty"]?.stringValue, Bytes.sameUTF8(kty, "RSA") else {
            return .unusable("its kty is \(jwk["kty"]?.stringValue.map { "\"\($0.prefix(16))\"" } ?? "missing"), not RSA")
        }
        if let use = jwk["use"] {
            guard let s = use.stringValue, Bytes.sameUTF8(s, "sig") else { return .unusable("its use is not \"sig\"") }
        }
        if let alg = jwk["alg"] {
            guard let s = alg.stringValue, Bytes.sameUTF8(s, "RS256") else { return .unusable("its alg is not RS256") }
        }
        guard let n = jwk["n"]?.stringValue.flatMap(Base64URL.decode), let e = jwk["e"]?.stringValue.flatMap(Base64URL.decode) else {
            return .unusable("its n or e is not base64url")
        }
        do {
            let key = try PublicKey.rsa(n: n, e: e)
            guard case .rsa(let bits) = key.kind, bits >= 2048 else { return .unusable("the modulus is under 2048 bits") }
            return .usable(key)
        } catch {
            return .unusable(error.message)
        }
    }

    /// Whether the set has a key (usable or not) with this id.
    public func contains(keyID: String) -> Bool {
        entries.contains { Bytes.sameUTF8($0.kid, keyID) }
    }

    /// The RS256 key with this id; `apple_key_unknown` or `apple_key_invalid`.
    package func key(for kid: String) throws(WebAuthnError) -> PublicKey {
        guard let entry = entries.first(where: { Bytes.sameUTF8($0.kid, kid) })?.entry else {
            throw WebAuthnError(.appleKeyUnknown, "no Apple key has kid \"\(kid.prefix(64))\"")
        }
        switch entry {
        case .usable(let key): return key
        case .unusable(let reason): throw WebAuthnError(.appleKeyInvalid, "the Apple key \"\(kid.prefix(64))\" cannot verify RS256: \(reason)")
        }
    }
}
