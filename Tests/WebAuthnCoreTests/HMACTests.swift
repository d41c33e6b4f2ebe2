import Foundation
import Testing
import _WebAuthnCrypto
import _WebAuthnEncoding

/// HMAC-SHA-256 under a key keyed once (`HMACKey`, the server secret's session tags and
/// stand-ins) and keyed per call (`Digest.hmacSHA256`).
@Suite("HMAC-SHA-256")
struct HMACTests {
    /// RFC 4231 test cases 1, 2 and 6 (a key longer than the block), and the empty key and message.
    static let vectors: [(key: [UInt8], message: String, mac: String)] = [
        ([UInt8](repeating: 0x0b, count: 20), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (Array("Jefe".utf8), "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        (
            [UInt8](repeating: 0xaa, count: 131), "Test Using Larger Than Block-Size Key - Hash Key First",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        ),
        ([], "", "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"),
    ]

    @Test("RFC 4231 vectors, whole or in parts, keyed once or per call; one key used again gives the same MAC")
    func vectors() {
        for v in Self.vectors {
            let expected = Bytes.fromHex(v.mac)
            let message = Array(v.message.utf8)
            let key = HMACKey(v.key)
            #expect(key.authenticate(message) == expected, "\(v.message)")
            #expect(key.authenticate(message) == expected, "a second MAC under the same keyed context")
            #expect(Digest.hmacSHA256(key: v.key, message) == expected)
            // Split anywhere, empty parts included: the MAC of the concatenation.
            let cut = message.count / 3
            #expect(key.authenticate(Array(message[..<cut]), [], Array(message[cut...])) == expected)
        }
    }

    @Test("one keyed context serves many threads at once")
    func concurrent() async {
        let key = HMACKey(Array("Jefe".utf8))
        let expected = Bytes.fromHex(Self.vectors[1].mac)
        let all = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    (0..<500).allSatisfy { _ in key.authenticate(Array("what do ya want for nothing?".utf8)) == expected }
                }
            }
            return await group.reduce(true) { $0 && $1 }
        }
        #expect(all)
    }
}
