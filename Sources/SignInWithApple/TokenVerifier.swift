public import Foundation
public import WebAuthnCore
package import _WebAuthnEncoding
package import _WebAuthnCrypto

/// Verifies Apple's identity tokens (and the JWTs of server-to-server
/// notifications) against a key set, at a given time. Pure: no network, no clock.
///
/// Checks, in order: size (16 KiB) and compact JWS shape with strict JSON
/// (duplicate members refused); header `alg` exactly `RS256`, a `kid`, no
/// `crit`; the key by `kid` (RSA, `use` `sig`, `alg` RS256 when present,
/// 2048 bits or more); the signature; `iss`; `aud` among the client ids;
/// `exp` and `iat` with the leeway; `sub`; the email claims; the nonce.
public enum AppleTokenVerifier {
    /// The largest token accepted, in bytes (Apple's are about 1 KiB).
    public static let maxTokenSize = 16 * 1024

    /// Verifies an identity token.
    ///
    /// - Parameters:
    ///   - nonce: the nonce the server issued for this sign-in, or `nil` to skip the
    ///     check. When given, the token's `nonce` must be it or its SHA-256 in lowercase
    ///     hex; a token without `nonce` fails whatever its `nonce_supported` says.
    ///   - now: the time to verify at (inject the clock).
    ///   - leeway: how far `exp` and `iat` may be off, in seconds.
    public static func verifyIdentityToken(
        _ token: String, keys: AppleKeySet, clientIDs: [String], nonce: String?,
        now: Date, leeway: TimeInterval = 60
    ) throws(WebAuthnError) -> AppleIdentityToken {
        let signed = try SignedToken(Array(token.utf8))
        let key = try keys.key(for: signed.kid)
        return try identityToken(signed, key: key, clientIDs: clientIDs, nonce: nonce, now: now, leeway: leeway)
    }

    package static func identityToken(
        _ signed: SignedToken, key: PublicKey, clientIDs: [String], nonce: String?,
        now: Date, leeway: TimeInterval
    ) throws(WebAuthnError) -> AppleIdentityToken {
        let claims = try signed.verified(with: key, clientIDs: clientIDs, now: now, leeway: leeway, requireExpiry: true)
        let c = claims.object
        guard let sub = c["sub"]?.stringValue, isIdentifier(sub) else {
            throw WebAuthnError(.appleTokenClaimInvalid, "sub is not a string of 1 to 255 visible ASCII characters")
        }
        let transferSub = try optionalString(c, "transfer_sub")
        if let transferSub, !isIdentifier(transferSub) {
            throw WebAuthnError(.appleTokenClaimInvalid, "transfer_sub is not a string of 1 to 255 visible ASCII characters")
        }
        if let nonce { try checkNonce(c["nonce"], expected: nonce) }
        return AppleIdentityToken(
            sub: sub, audience: claims.audience,
            email: try email(c["email"]) { WebAuthnError(.appleTokenClaimInvalid, "email is not an email address: \($0)") },
            emailVerified: try flag(c, "email_verified"),
            isPrivateEmail: try flag(c, "is_private_email"),
            realUserStatus: c["real_user_status"]?.intValue.map(AppleRealUserStatus.init(rawValue:)),
            transferSub: transferSub,
            issuedAt: claims.issuedAt, expiresAt: claims.expiresAt ?? claims.issuedAt,
            nonceSupported: try flag(c, "nonce_supported"),
            authenticatedAt: c["auth_time"].flatMap(\.numberValue).flatMap(date),
            nonce: c["nonce"]?.stringValue.flatMap { $0.utf8.count <= 256 ? $0 : nil })
    }

    /// Whether `value` can be an Apple user identifier (`sub`, `transfer_sub`, a notification's
    /// `events.sub`): 1 to 255 visible ASCII characters, as Apple's are (`000123.0a1b….1234`).
    /// A NUL in one cut it short where a store bound it as a C string, and matched another user's
    /// identity (red team); control characters, spaces and other scripts are refused with it.
    static func isIdentifier(_ value: String) -> Bool {
        let bytes = value.utf8
        return (1...255).contains(bytes.count) && bytes.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// An email claim (of an identity token or a notification's events): absent, or a string of 3
    /// to 320 bytes with an `@` and no control, format (bidirectional, zero-width), separator,
    /// private-use, unassigned or default-ignorable characters (letters and marks that show
    /// nothing: U+3164 HANGUL FILLER, variation selectors), as addresses are; `invalid` makes the
    /// error, given what is wrong. Red team, fourteenth pass: an `email-enabled` notification
    /// stored CR, LF, ESC and U+202E in the email, which the account routes then returned, and a
    /// NUL made the PostgreSQL store fail with `500`.
    static func email(_ claim: JSONValue?, invalid: (String) -> WebAuthnError) throws(WebAuthnError) -> String? {
        guard let claim else { return nil }
        guard let value = claim.stringValue else { throw invalid("not a string") }
        guard (3...320).contains(value.utf8.count), value.utf8.contains(UInt8(ascii: "@")) else {
            throw invalid("not 3 to 320 bytes with an @")
        }
        let refused = value.unicodeScalars.contains { scalar in
            guard !scalar.properties.isDefaultIgnorableCodePoint else { return true }
            return switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .spaceSeparator, .surrogate, .privateUse, .unassigned: true
            default: false
            }
        }
        guard !refused else { throw invalid("it holds a control, format, space, private-use, unassigned or invisible character") }
        return value
    }

    /// The nonce claim is the issued nonce, or SHA-256 of it in lowercase hex (apps follow both conventions).
    /// Compared as bytes, in time that depends only on the lengths.
    static func checkNonce(_ claim: JSONValue?, expected: String) throws(WebAuthnError) {
        guard let claim else { throw WebAuthnError(.appleNonceMismatch, "a nonce was expected and the token has none") }
        guard let value = claim.stringValue else { throw WebAuthnError(.appleNonceMismatch, "the token's nonce is not a string") }
        let got = Array(value.utf8)
        let raw = Array(expected.utf8)
        let hashed = Array(Bytes.hex(Digest.sha256(raw)).utf8)
        let matchesRaw = Bytes.constantTimeEqual(got, raw)
        let matchesHash = Bytes.constantTimeEqual(got, hashed)
        guard matchesRaw || matchesHash else {
            throw WebAuthnError(.appleNonceMismatch, "the token's nonce is neither the expected nonce nor its SHA-256")
        }
    }

    /// A boolean claim: `true`/`false` or the strings `"true"`/`"false"` (Apple has sent both); anything else is refused.
    static func flag(_ c: JSONObject, _ name: String) throws(WebAuthnError) -> Bool? {
        guard let v = c[name] else { return nil }
        if let b = v.boolValue { return b }
        if let s = v.stringValue {
            if Bytes.sameUTF8(s, "true") { return true }
            if Bytes.sameUTF8(s, "false") { return false }
        }
        throw WebAuthnError(.appleTokenClaimInvalid, "\(name) is neither a boolean nor \"true\"/\"false\"")
    }

    static func optionalString(_ c: JSONObject, _ name: String) throws(WebAuthnError) -> String? {
        guard let v = c[name] else { return nil }
        guard let s = v.stringValue, s.utf8.count <= 1024 else {
            throw WebAuthnError(.appleTokenClaimInvalid, "\(name) is not a string of at most 1024 bytes")
        }
        return s
    }

    /// Seconds since 1970 as a date, for 0 up to year 5138.
    static func date(_ seconds: Double) -> Date? {
        guard seconds.isFinite, seconds >= 0, seconds < 1e11 else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }
}

/// A compact JWS whose header passed Apple's rules, not yet verified.
package struct SignedToken {
    package let jws: JWS
    package let kid: String
    package let compact: [UInt8]

    package init(_ compact: [UInt8]) throws(WebAuthnError) {
        guard compact.count <= AppleTokenVerifier.maxTokenSize else {
            throw WebAuthnError(.appleTokenMalformed, "the token is \(compact.count) bytes; the limit is \(AppleTokenVerifier.maxTokenSize)")
        }
        let jws: JWS
        do {
            jws = try JWS(compact: compact, maxSize: AppleTokenVerifier.maxTokenSize, canonical: true)
        } catch {
            throw WebAuthnError(.appleTokenMalformed, "the token is not a compact JWS Apple signs: \(error.message)")
        }
        // Exactly RS256: JWS accepts other algorithms (ES256, PS256...) that Apple never uses.
        guard let alg = jws.header["alg"]?.stringValue, Bytes.sameUTF8(alg, "RS256"), jws.algorithm == .rs256 else {
            throw WebAuthnError(
                .appleTokenMalformed, "the token's alg is \(jws.header["alg"]?.stringValue.map { "\"\($0.prefix(16))\"" } ?? "missing"); only RS256 is accepted"
            )
        }
        guard jws.header["crit"] == nil else { throw WebAuthnError(.appleTokenMalformed, "the token's header has crit, which is refused") }
        guard let kid = jws.header["kid"]?.stringValue, !kid.isEmpty else {
            throw WebAuthnError(.appleTokenMalformed, "the token's header has no kid")
        }
        guard jws.payload.objectValue != nil else { throw WebAuthnError(.appleTokenMalformed, "the token's payload is not a JSON object") }
        self.jws = jws
        self.kid = kid
        self.compact = compact
    }

    package struct Claims {
        package let object: JSONObject
        package let audience: String
        package let issuedAt: Date
        package let expiresAt: Date?
    }

    /// Verifies the signature, then `iss`, `aud`, `iat` and `exp` (`exp` optional when `requireExpiry` is false).
    package func verified(
        with key: PublicKey, clientIDs: [String], now: Date, leeway: TimeInterval,
        requireExpiry: Bool
    ) throws(WebAuthnError) -> Claims {
        guard key.verify(signature: jws.signature, parts: [jws.signingInput], algorithm: .rs256) else {
            throw WebAuthnError(.appleTokenSignatureInvalid, "the token's RS256 signature does not verify with Apple key \"\(kid.prefix(64))\"")
        }
        let c = jws.payload.objectValue ?? JSONObject()
        guard let iss = c["iss"]?.stringValue, Bytes.sameUTF8(iss, SignInWithAppleConfiguration.issuer) else {
            throw WebAuthnError(
                .appleTokenClaimInvalid,
                "iss is \(c["iss"]?.stringValue.map { "\"\($0.prefix(64))\"" } ?? "missing"); expected \(SignInWithAppleConfiguration.issuer)")
        }
        let audience: String
        switch c["aud"] {
        case .string(let s)?: audience = s
        case .array(let items)? where items.count == 1 && items[0].stringValue != nil: audience = items[0].stringValue ?? ""
        default: throw WebAuthnError(.appleTokenClaimInvalid, "aud is not a string or an array of exactly one string")
        }
        guard clientIDs.contains(where: { Bytes.sameUTF8($0, audience) }) else {
            throw WebAuthnError(.appleTokenClaimInvalid, "aud \"\(audience.prefix(64))\" is not a configured client id")
        }
        guard let iat = c["iat"]?.numberValue.flatMap(AppleTokenVerifier.date) else {
            throw WebAuthnError(.appleTokenClaimInvalid, "iat is not a number of seconds")
        }
        guard iat.timeIntervalSince(now) <= leeway else {
            throw WebAuthnError(.appleTokenClaimInvalid, "iat is \(Int(iat.timeIntervalSince(now))) s in the future (leeway \(Int(leeway)) s)")
        }
        var expiresAt: Date?
        if let exp = c["exp"] {
            guard let e = exp.numberValue.flatMap(AppleTokenVerifier.date) else {
                throw WebAuthnError(.appleTokenClaimInvalid, "exp is not a number of seconds")
            }
            expiresAt = e
        } else if requireExpiry {
            throw WebAuthnError(.appleTokenClaimInvalid, "exp is missing")
        }
        if let e = expiresAt {
            guard e.addingTimeInterval(leeway) > now else {
                throw WebAuthnError(.appleTokenExpired, "the token expired \(Int(now.timeIntervalSince(e))) s ago (leeway \(Int(leeway)) s)")
            }
            // Red team, round 28: a token that expires before it was issued was accepted.
            guard e > iat else { throw WebAuthnError(.appleTokenClaimInvalid, "exp is not after iat") }
        }
        return Claims(object: c, audience: audience, issuedAt: iat, expiresAt: expiresAt)
    }
}
