import Foundation
import Testing
import SignInWithApple
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding
import _WebAuthnCrypto

@Suite("Apple client secret")
struct ClientSecretTests {
    @Test("an ES256 JWT with kid, iss, sub, aud, iat backdated, exp - iat bounded, raw r‖s that verifies")
    func shape() throws {
        let credentials = try AppleStandIn.makeCredentials(teamID: "TEAMID1234", keyID: "KEYID12345")
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        for _ in 0..<20 {  // r or s with a high bit or a leading zero byte come up
            let secret = try AppleClientSecret.make(credentials: credentials, clientID: "com.example.web", now: now)
            let parts = secret.split(separator: ".", omittingEmptySubsequences: false)
            #expect(parts.count == 3)
            #expect(Base64URL.decode(String(parts[2]))?.count == 64)
            let jws = try JWS(compact: Array(secret.utf8))
            #expect(jws.header == ["alg": "ES256", "kid": "KEYID12345"])
            #expect(jws.payload["iss"] == "TEAMID1234")
            #expect(jws.payload["sub"] == "com.example.web")
            #expect(jws.payload["aud"] == "https://appleid.apple.com")
            let iat = try #require(jws.payload["iat"]?.intValue), exp = try #require(jws.payload["exp"]?.intValue)
            #expect(iat == 1_800_000_000 - 60)
            #expect(exp - iat == 3600 + 60)
            let publicKey = try PublicKey.fromSubjectPublicKeyInfo(credentials.privateKey.publicKeyDER())
            try jws.verifySignature(with: publicKey)
        }
    }

    @Test("the lifetime is bounded well under Apple's 15,777,000 s")
    func lifetime() throws {
        let credentials = try AppleStandIn.makeCredentials()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let longest = try AppleClientSecret.make(
            credentials: credentials, clientID: "c", now: now,
            lifetime: SignInWithAppleConfiguration.maxClientSecretLifetime)
        let jws = try JWS(compact: Array(longest.utf8))
        let span = try #require(jws.payload["exp"]?.intValue) - (try #require(jws.payload["iat"]?.intValue))
        #expect(span < 15_777_000 - 86_400)
        #expect(throws: WebAuthnError(.configurationInvalid, "")) {
            try AppleClientSecret.make(credentials: credentials, clientID: "c", now: now, lifetime: 15_777_000)
        }
        #expect(throws: WebAuthnError(.configurationInvalid, "")) {
            try SignInWithAppleConfiguration(clientIDs: ["c"], clientSecretLifetime: 16_000_000)
        }
    }

    @Test("the .p8 key: a P-256 PKCS#8 PEM is read; RSA, P-384 and junk are refused")
    func privateKey() throws {
        let p256 = try SigningKey.generate(.es256).privateKeyPEM()
        _ = try ApplePrivateKey(pem: p256)
        for other in [
            try SigningKey.generate(.rs256).privateKeyPEM(), try SigningKey.generate(.es384).privateKeyPEM(),
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "",
        ] {
            #expect(throws: WebAuthnError(.configurationInvalid, "")) { try ApplePrivateKey(pem: other) }
        }
    }

    @Test("DER to r‖s: padding, leading zeros, and malformed input refused")
    func derToRaw() throws {
        // r = 0x00 0x80.. (a positive integer needing its zero byte), s = 0x01 (short).
        let r: [UInt8] = [0x00] + [0x80] + [UInt8](repeating: 0x11, count: 31)
        let s: [UInt8] = [0x01]
        let der: [UInt8] = [0x30, UInt8(2 + r.count + 2 + s.count), 0x02, UInt8(r.count)] + r + [0x02, 0x01] + s
        let raw = try ECDSASignature.raw(fromDER: der, coordinateSize: 32)
        #expect(raw.count == 64)
        #expect(Array(raw[0..<32]) == Array(r.dropFirst()))
        #expect(Array(raw[32..<64]) == [UInt8](repeating: 0, count: 31) + [1])
        // And back: the engine's converter gives the same DER.
        #expect(JWS.derSignature(r: Array(raw[0..<32]), s: Array(raw[32...])) == der)
        let bad: [[UInt8]] = [
            [], [0x30], [0x30, 0x00], der + [0x00], Array(der.dropLast()),
            [0x30, 0x06, 0x02, 0x01, 0x80, 0x02, 0x01, 0x01],  // negative r
            [0x30, 0x07, 0x02, 0x02, 0x00, 0x01, 0x02, 0x01, 0x01],  // non-minimal r
            [0x30, 0x06, 0x02, 0x05, 0x01, 0x02, 0x01, 0x01],  // r overruns
            [0x30, 0x26, 0x02, 0x21] + [UInt8](repeating: 0x11, count: 33) + [0x02, 0x01, 0x01],  // r of 33 bytes
            [0x31, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01],  // not a SEQUENCE
            [0x30, 0x81, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01],  // non-minimal length
        ]
        for b in bad {
            #expect(throws: WebAuthnError(.cryptoFailure, "")) { try ECDSASignature.raw(fromDER: b, coordinateSize: 32) }
        }
    }
}
