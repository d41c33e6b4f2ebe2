internal import WebAuthnCore
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Stand-in credentials for names that have no account or no credential
/// (WebAuthn L3 §14.6.2–14.6.3): request options for them look like a real
/// account's, derived from HMAC-SHA-256 of the name's look-alike key under
/// the server secret, so they are the same on every request (and across
/// restarts and instances that share the secret). Nobody can answer them.
struct StandIns: Sendable {
    let secret: [UInt8]

    /// The user handle a stand-in ceremony is started for (no account has it:
    /// handles of real accounts are random, and a lookup of it finds nothing).
    func userHandle(for name: String) -> [UInt8] {
        Digest.hmacSHA256(key: secret, Array("webauthn stand-in handle".utf8), Array(UserName.lookalikeKey(name).utf8))
    }

    /// One or two descriptors shaped like real ones (passkey or security-key
    /// ID lengths, plausible transports).
    func credentials(for name: String) -> [CredentialDescriptor] {
        let seed = Digest.hmacSHA256(key: secret, Array("webauthn stand-in credentials".utf8), Array(UserName.lookalikeKey(name).utf8))
        let count = 1 + Int(seed[0] & 1)
        let transports: [[AuthenticatorTransport]] = [[.hybrid, .internal], [.usb], [.internal], [.nfc, .usb], []]
        let lengths = [16, 20, 32, 48, 64]
        return (0..<count).map { i in
            let length = lengths[Int(seed[1 + i]) % lengths.count]
            let nonce = Array(Digest.hmacSHA256(key: secret, Array("webauthn stand-in id".utf8), seed, [UInt8(i)]).prefix(8))
            return CredentialDescriptor(id: nonce + tag(nonce, length: length - 8), transports: transports[Int(seed[3 + i]) % transports.count])
        }
    }

    /// A stand-in ID is 8 bytes and their HMAC tag, so the server knows its
    /// own stand-ins (and refuses to register one, as if it were taken)
    /// without remembering any.
    func isStandIn(_ id: [UInt8]) -> Bool {
        guard (16...64).contains(id.count) else { return false }
        let nonce = Array(id[0..<8])
        return tag(nonce, length: id.count - 8) == Array(id[8...])
    }

    func tag(_ nonce: [UInt8], length: Int) -> [UInt8] {
        var out: [UInt8] = []
        var block: UInt8 = 0
        while out.count < length {
            out += Digest.hmacSHA256(key: secret, Array("webauthn stand-in tag".utf8), nonce, [block])
            block &+= 1
        }
        return Array(out.prefix(length))
    }
}
