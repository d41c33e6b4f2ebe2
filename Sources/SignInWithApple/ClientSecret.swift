public import Foundation
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The client secret Apple's token and revoke endpoints want: an ES256 JWT
/// signed with the team's Sign in with Apple key.
///
/// Header `{"alg":"ES256","kid":<key id>}`; claims `iss` = team id, `iat` = now
/// minus 60 s (Apple's clock may lag), `exp` = now plus the lifetime (one hour
/// by default, capped at 180 days: Apple refuses more than 15,777,000 s),
/// `aud` = `https://appleid.apple.com`, `sub` = the client id. The signature is
/// JOSE's raw r ‖ s (64 bytes), converted from OpenSSL's DER.
public enum AppleClientSecret {
    /// How far `iat` is backdated, in seconds.
    public static let backdating: TimeInterval = 60

    /// Makes a client secret for `clientID`, valid from `now - 60 s` for `lifetime` seconds.
    public static func make(
        credentials: AppleClientCredentials, clientID: String, now: Date,
        lifetime: TimeInterval = 3600
    ) throws(WebAuthnError) -> String {
        guard (60...SignInWithAppleConfiguration.maxClientSecretLifetime).contains(lifetime) else {
            throw WebAuthnError(.configurationInvalid, "the client secret lifetime must be 60 s to 180 days; got \(lifetime)")
        }
        let seconds = now.timeIntervalSince1970
        guard seconds.isFinite, seconds > backdating, seconds < 1e11 else {
            throw WebAuthnError(.configurationInvalid, "the clock reads an impossible time")
        }
        let iat = Int64(seconds - backdating)
        let exp = Int64(seconds + lifetime)
        let header: JSONValue = ["alg": "ES256", "kid": .string(credentials.keyID)]
        let claims: JSONValue = [
            "iss": .string(credentials.teamID), "iat": .number(Double(iat)), "exp": .number(Double(exp)),
            "aud": .string(SignInWithAppleConfiguration.issuer), "sub": .string(clientID),
        ]
        let input = Base64URL.encode(header.serializedBytes()) + "." + Base64URL.encode(claims.serializedBytes())
        let der = try credentials.privateKey.key.sign(Array(input.utf8))
        let raw = try ECDSASignature.raw(fromDER: der, coordinateSize: 32)
        return input + "." + Base64URL.encode(raw)
    }
}

/// Converts between ECDSA-Sig-Value (DER, as OpenSSL signs) and JOSE's fixed-size r ‖ s.
package enum ECDSASignature {
    /// `SEQUENCE { INTEGER r, INTEGER s }` to r ‖ s, each left-padded to `coordinateSize`.
    /// Strict DER: short or minimal long lengths, no trailing bytes, positive minimal
    /// integers no longer than the coordinate. Throws `crypto_failure` on anything else.
    package static func raw(fromDER der: [UInt8], coordinateSize: Int) throws(WebAuthnError) -> [UInt8] {
        func fail(_ why: String) -> WebAuthnError { WebAuthnError(.cryptoFailure, "the ECDSA signature is not DER: \(why)") }
        var position = 0

        func readLength() throws(WebAuthnError) -> Int {
            guard position < der.count else { throw fail("truncated length") }
            let first = der[position]
            position += 1
            if first < 0x80 { return Int(first) }
            guard first == 0x81, position < der.count else { throw fail("unsupported length form") }
            let length = Int(der[position])
            position += 1
            guard length >= 0x80 else { throw fail("non-minimal length") }
            return length
        }

        func readInteger() throws(WebAuthnError) -> [UInt8] {
            guard position < der.count, der[position] == 0x02 else { throw fail("expected an INTEGER") }
            position += 1
            let length = try readLength()
            guard length >= 1, length <= der.count - position else { throw fail("INTEGER length \(length) overruns") }
            var bytes = Array(der[position..<(position + length)])
            position += length
            guard bytes[0] & 0x80 == 0 else { throw fail("negative INTEGER") }
            if bytes.count > 1, bytes[0] == 0 {
                guard bytes[1] & 0x80 != 0 else { throw fail("non-minimal INTEGER") }
                bytes.removeFirst()
            }
            guard bytes.count <= coordinateSize else { throw fail("INTEGER of \(bytes.count) bytes; the curve's are \(coordinateSize)") }
            return [UInt8](repeating: 0, count: coordinateSize - bytes.count) + bytes
        }

        guard coordinateSize > 0, coordinateSize <= 66 else { throw fail("unsupported coordinate size") }
        guard der.count >= 2, der[0] == 0x30 else { throw fail("expected a SEQUENCE") }
        position = 1
        let length = try readLength()
        guard length == der.count - position else { throw fail("SEQUENCE length \(length) for \(der.count - position) bytes") }
        let r = try readInteger()
        let s = try readInteger()
        guard position == der.count else { throw fail("trailing bytes") }
        return r + s
    }
}
