import Foundation
import Testing
import SignInWithApple
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding
import _WebAuthnCrypto

@Suite("Apple identity token verification")
struct TokenVerificationTests {
    let f: TokenFixture
    init() throws { f = try TokenFixture() }

    @Test("a token as Apple issues it verifies, with every claim read")
    func valid() throws {
        let t = try f.verify(
            f.token {
                $0["transfer_sub"] = "old.sub"; $0["at_hash"] = "x"
            })
        #expect(t.sub == f.user.sub)
        #expect(t.audience == TokenFixture.clientID)
        #expect(t.email == "x@privaterelay.appleid.com")
        #expect(t.emailVerified == true && t.isPrivateEmail == true)
        #expect(t.realUserStatus == .likelyReal)
        #expect(t.transferSub == "old.sub")
        #expect(t.nonceSupported == true)
        #expect(t.issuedAt == TokenFixture.now && t.expiresAt == TokenFixture.now.addingTimeInterval(86_400))
        // The Services ID is a client id too.
        #expect(try f.verify(f.token { $0["aud"] = .string(TokenFixture.servicesID) }).audience == TokenFixture.servicesID)
    }

    static let defects: [(AppleStandIn.Defect, String)] = [
        (.algorithmNone, "apple_token_malformed"), (.hs256WithPublicKey, "apple_token_malformed"), (.es256, "apple_token_malformed"),
        (.noKid, "apple_token_malformed"), (.unknownKid, "apple_key_unknown"), (.crit, "apple_token_malformed"),
        (.editedPayload, "apple_token_signature_invalid"), (.wrongKey, "apple_token_signature_invalid"),
    ]

    @Test(
        "broken tokens are refused: none, HS256 keyed with the public key, ES256, no kid, unknown kid, crit, edited payload, wrong key",
        arguments: defects)
    func defect(_ defect: AppleStandIn.Defect, expected: String) {
        #expect(f.code(f.standIn.sign(.object(f.claims()), defect: defect)) == expected, "\(defect)")
    }

    @Test("the HS256 confusion fails even with the public key's bytes as the HMAC key")
    func hs256Confusion() throws {
        let token = f.standIn.sign(.object(f.claims()), defect: .hs256WithPublicKey)
        #expect(token.split(separator: ".").count == 3 && !token.hasSuffix("."))
        #expect(f.code(token) == "apple_token_malformed")
    }

    @Test("keys that cannot verify RS256 are refused: not RSA, use other than sig, alg other than RS256, a short modulus")
    func unusableKeys() throws {
        let token = f.token()
        #expect(f.code(token, keys: try f.keys { $0["kty"] = "EC" }) == "apple_key_invalid")
        #expect(f.code(token, keys: try f.keys { $0["use"] = "enc" }) == "apple_key_invalid")
        #expect(f.code(token, keys: try f.keys { $0["alg"] = "RS384" }) == "apple_key_invalid")
        #expect(f.code(token, keys: try f.keys { $0["alg"] = "rs256" }) == "apple_key_invalid")
        var short = [UInt8](repeating: 0xC5, count: 128)
        short[127] |= 1
        #expect(f.code(token, keys: try f.keys { $0["n"] = .string(Base64URL.encode(short)) }) == "apple_key_invalid")
        // Without use and alg the key is fine.
        #expect(
            f.code(
                token,
                keys: try f.keys {
                    $0["use"] = nil; $0["alg"] = nil
                }) == nil)
    }

    @Test("iss must be https://appleid.apple.com exactly")
    func issuer() {
        for iss in ["https://appleid.apple.com/", "https://APPLEID.apple.com", "http://appleid.apple.com", "https://appleid.apple.com.evil"] {
            #expect(f.code(f.token { $0["iss"] = .string(iss) }) == "apple_token_claim_invalid", "\(iss)")
        }
        #expect(f.code(f.token { $0["iss"] = nil }) == "apple_token_claim_invalid")
    }

    @Test("aud must be one configured client id, exactly; an array of exactly one is read")
    func audience() throws {
        #expect(f.code(f.token { $0["aud"] = "com.example.other" }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["aud"] = "COM.example.app" }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["aud"] = nil }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["aud"] = .array([.string(TokenFixture.clientID), "com.example.other"]) }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["aud"] = .array(["com.example.other"]) }) == "apple_token_claim_invalid")
        #expect(try f.verify(f.token { $0["aud"] = .array([.string(TokenFixture.clientID)]) }).audience == TokenFixture.clientID)
    }

    @Test("exp and iat with the 60 s leeway")
    func times() throws {
        let now = TokenFixture.now
        #expect(
            f.code(
                f.token {
                    $0["iat"] = .number(now.timeIntervalSince1970 - 600); $0["exp"] = .number(now.timeIntervalSince1970 - 61)
                }) == "apple_token_expired")
        #expect(
            f.code(
                f.token {
                    $0["iat"] = .number(now.timeIntervalSince1970 - 600); $0["exp"] = .number(now.timeIntervalSince1970 - 60)
                }) == "apple_token_expired")
        #expect(
            f.code(
                f.token {
                    $0["iat"] = .number(now.timeIntervalSince1970 - 600); $0["exp"] = .number(now.timeIntervalSince1970 - 59)
                }) == nil)
        #expect(f.code(f.token { $0["iat"] = .number(now.timeIntervalSince1970 + 61) }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["iat"] = .number(now.timeIntervalSince1970 + 60) }) == nil)
        #expect(f.code(f.token(), at: now.addingTimeInterval(86_400 + 61)) == "apple_token_expired")
        #expect(f.code(f.token { $0["exp"] = "1900000000" }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["iat"] = "1800000000" }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["exp"] = nil }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["iat"] = nil }) == "apple_token_claim_invalid")
        // exp not after iat (red team, round 28: accepted while within the leeway of now).
        for exp in [now.timeIntervalSince1970 - 30, now.timeIntervalSince1970] {
            #expect(
                f.code(
                    f.token {
                        $0["iat"] = .number(now.timeIntervalSince1970); $0["exp"] = .number(exp)
                    }) == "apple_token_claim_invalid")
        }
    }

    @Test("sub and transfer_sub are 1 to 255 visible ASCII characters: a NUL, a space, a control or another script is refused")
    func subject() {
        #expect(f.code(f.token { $0["sub"] = nil }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["sub"] = "" }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["sub"] = 42 }) == "apple_token_claim_invalid")
        // Red team: `<sub>\0evil` signed in as `<sub>`, the store having bound it as a C string.
        for bad in [f.user.sub + "\u{0}evil", f.user.sub + " ", "\t" + f.user.sub, f.user.sub + "\u{7F}", "001234.аbc", String(repeating: "1", count: 256)] {
            #expect(f.code(f.token { $0["sub"] = .string(bad) }) == "apple_token_claim_invalid", "\(bad.debugDescription)")
            #expect(f.code(f.token { $0["transfer_sub"] = .string(bad) }) == "apple_token_claim_invalid", "transfer_sub \(bad.debugDescription)")
        }
        #expect(f.code(f.token { $0["transfer_sub"] = "" }) == "apple_token_claim_invalid")
        #expect(f.code(f.token { $0["sub"] = .string(String(repeating: "1", count: 255)) }) == nil)
    }

    @Test("email_verified and is_private_email as booleans or \"true\"/\"false\"; anything else refused")
    func booleans() throws {
        let strings = try f.verify(
            f.token {
                $0["email_verified"] = "true"; $0["is_private_email"] = "false"
            })
        #expect(strings.emailVerified == true && strings.isPrivateEmail == false)
        let bools = try f.verify(
            f.token {
                $0["email_verified"] = false; $0["is_private_email"] = true
            })
        #expect(bools.emailVerified == false && bools.isPrivateEmail == true)
        let absent = try f.verify(
            f.token {
                $0["email"] = nil; $0["email_verified"] = nil; $0["is_private_email"] = nil
            })
        #expect(absent.email == nil && absent.emailVerified == nil && absent.isPrivateEmail == nil)
        for bad: JSONValue in ["yes", "TRUE", 1, .null] {
            #expect(f.code(f.token { $0["email_verified"] = bad }) == "apple_token_claim_invalid", "\(bad)")
            #expect(f.code(f.token { $0["is_private_email"] = bad }) == "apple_token_claim_invalid", "\(bad)")
        }
        #expect(f.code(f.token { $0["email"] = 5 }) == "apple_token_claim_invalid")
    }

    /// Emails Apple could never send, each refused (red team, fourteenth pass: CR, LF, ESC and
    /// U+202E were stored and shown, and a NUL failed the PostgreSQL store with `500`).
    static let badEmails = [
        "a\r\nb@example.com", "a\u{1B}[31m@example.com", "\u{202E}moc.elpmaxe@a", "a\u{0}@example.com", "a\u{200B}@example.com",
        "a b@example.com", "no-at-sign", "", "a@" + String(repeating: "b", count: 319), "a\u{E000}@example.com", "a\u{2028}@example.com",
        // Letters and marks that show nothing (default-ignorable): U+3164 HANGUL FILLER is a letter (Lo).
        "a\u{3164}@example.com", "a\u{115F}@example.com", "a\u{FFA0}@example.com", "a\u{FE0F}@example.com", "a\u{180B}@example.com",
    ]

    @Test("email is an address: an @, 3 to 320 bytes, no control, format, separator, private-use, unassigned or default-ignorable character")
    func email() throws {
        for good in ["a@b.c", "x@privaterelay.appleid.com", "josé@example.com", "<b>@example.com", "a@" + String(repeating: "b", count: 318)] {
            #expect(try f.verify(f.token { $0["email"] = .string(good) }).email == good)
        }
        for bad in Self.badEmails {
            #expect(f.code(f.token { $0["email"] = .string(bad) }) == "apple_token_claim_invalid", "\(bad.debugDescription)")
        }
    }

    @Test("real_user_status keeps values it does not know")
    func realUserStatus() throws {
        #expect(try f.verify(f.token { $0["real_user_status"] = 7 }).realUserStatus?.rawValue == 7)
        #expect(try f.verify(f.token { $0["real_user_status"] = 0 }).realUserStatus == .unsupported)
        #expect(try f.verify(f.token { $0["real_user_status"] = nil }).realUserStatus == nil)
    }

    @Test("the nonce: raw or lowercase hex SHA-256; missing or wrong fails whatever nonce_supported says")
    func nonce() throws {
        let nonce = "n-0123456789"
        #expect(f.code(f.token(), nonce: nonce) == nil)
        let hashed = Bytes.hex(Digest.sha256(Array(nonce.utf8)))
        #expect(f.code(f.token { $0["nonce"] = .string(hashed) }, nonce: nonce) == nil)
        #expect(f.code(f.token { $0["nonce"] = .string(hashed.uppercased()) }, nonce: nonce) == "apple_nonce_mismatch")
        #expect(f.code(f.token { $0["nonce"] = "other" }, nonce: nonce) == "apple_nonce_mismatch")
        #expect(f.code(f.token { $0["nonce"] = nil }, nonce: nonce) == "apple_nonce_mismatch")
        #expect(
            f.code(
                f.token {
                    $0["nonce"] = nil; $0["nonce_supported"] = false
                }, nonce: nonce) == "apple_nonce_mismatch")
        #expect(
            f.code(
                f.token {
                    $0["nonce"] = nil; $0["nonce_supported"] = "false"
                }, nonce: nonce) == "apple_nonce_mismatch")
        #expect(f.code(f.token { $0["nonce"] = 12 }, nonce: nonce) == "apple_nonce_mismatch")
        // Not expecting one: the claim is not read.
        #expect(f.code(f.token { $0["nonce"] = "anything" }, nonce: nil) == nil)
    }

    @Test("strict JSON: duplicate claims, a non-object payload, a token over 16 KiB")
    func strictJSON() throws {
        var text = JSONValue.object(f.claims()).serialized()
        text.removeLast()
        text += #","sub":"attacker"}"#
        #expect(f.code(f.standIn.token(claimsJSON: text)) == "apple_token_malformed")
        #expect(f.code(f.standIn.token(claimsJSON: "[1]")) == "apple_token_malformed")
        #expect(f.code(f.token { $0["pad"] = .string(String(repeating: "a", count: 16 * 1024)) }) == "apple_token_malformed")
        for junk in ["", "a.b", "a.b.c.d", "!!!.###.$$$"] { #expect(f.code(junk) == "apple_token_malformed", "\(junk)") }
    }

    @Test("key sets: strict JSON, unique kids, limits")
    func keySets() throws {
        let good = f.standIn.keySetJSON
        #expect(throws: WebAuthnError(.appleJWKSInvalid, "")) { try AppleKeySet(json: Array(#"{"keys":[],"keys":[]}"#.utf8)) }
        #expect(throws: WebAuthnError(.appleJWKSInvalid, "")) { try AppleKeySet(json: Array(#"{"nokeys":[]}"#.utf8)) }
        #expect(throws: WebAuthnError(.appleJWKSInvalid, "")) { try AppleKeySet(json: Array(String(repeating: " ", count: 70_000).utf8)) }
        let one = f.standIn.keySet()["keys"]!.arrayValue![0]
        let twice = JSONValue.object(["keys": .array([one, one])]).serializedBytes()
        #expect(throws: WebAuthnError(.appleJWKSInvalid, "")) { try AppleKeySet(json: twice) }
        #expect(try AppleKeySet(json: Array(good.utf8)).keyIDs == [f.standIn.currentKeyID])
    }

    @Test("notification-shaped and identity tokens share the key rules: a rotated-out key is unknown")
    func rotatedOut() throws {
        let old = f.token()
        try f.standIn.rotateKeys(dropOld: true)
        #expect(f.code(old) == "apple_key_unknown")
        #expect(f.code(f.token()) == nil)
    }

    @Test("hostile input: every truncation and byte flip of a token is refused without a crash")
    func hostile() throws {
        let token = Array(f.token().utf8)
        let keys = try f.keys
        for length in 0..<token.count {
            #expect(f.code(String(decoding: token[0..<length], as: UTF8.self), keys: keys) != nil)
        }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            var mutated = token
            mutated[Int.random(in: 0..<token.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            if mutated == token { continue }
            // A flip inside the base64url padding bits can decode to the same bytes; anything else must fail.
            let text = String(decoding: mutated, as: UTF8.self)
            if let t = try? f.verify(text, keys: keys) { #expect(t.sub == f.user.sub) }
        }
    }
}
