import Testing
import _WebAuthnCrypto
import _WebAuthnEncoding

/// AES-256-GCM sealing of secrets at rest (the Apple refresh tokens).
@Suite("Sealed secrets")
struct SealTests {
    let key = SecureRandom.bytes(32)

    @Test("a sealed value opens with its key and associated data, and with nothing else")
    func roundTrip() throws {
        let secret = Array("r.refresh-token.abc".utf8)
        let sealed = try Seal.seal(secret, key: key, associated: Array("apple/001.sub".utf8))
        #expect(sealed.count == 1 + 12 + secret.count + 16)
        #expect(try Seal.open(sealed, key: key, associated: Array("apple/001.sub".utf8)) == secret)
        // Fresh nonce every time: the same secret never seals to the same bytes.
        #expect(try Seal.seal(secret, key: key, associated: Array("apple/001.sub".utf8)) != sealed)
        #expect(throws: WebAuthnError.self) { try Seal.open(sealed, key: SecureRandom.bytes(32), associated: Array("apple/001.sub".utf8)) }
        #expect(throws: WebAuthnError.self) { try Seal.open(sealed, key: key, associated: Array("apple/002.sub".utf8)) }
        for i in [0, 1, 13, sealed.count - 1] {
            var edited = sealed
            edited[i] ^= 1
            #expect(throws: WebAuthnError.self) { try Seal.open(edited, key: key, associated: Array("apple/001.sub".utf8)) }
        }
        for length in [0, 1, 28] {
            #expect(throws: WebAuthnError.self) { try Seal.open(Array(sealed.prefix(length)), key: key) }
        }
        #expect(try Seal.open(try Seal.seal([], key: key), key: key) == [])
    }
}
