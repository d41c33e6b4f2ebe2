internal import _WebAuthnCrypto

/// Stand-in credentials for names that have no account or no credential
/// (WebAuthn L3 §14.6.2–14.6.3): request options for them look like a real
/// account's, derived from HMAC-SHA-256 of the name's capitals key (``UserName/capitalsKey(_:)``)
/// under the server secret, so they are the same on every request (and across
/// restarts and instances that share the secret). Nobody can answer them.
///
/// The capitals key is the one a name's two letter cases share: an account is found by either
/// case, so its stand-ins must not tell them apart. Derived from the look-alike key, `Богдан` and
/// `богдан` got two sets where an account `Борис` answered both alike (red team, thirty-second
/// pass re-check). Names alike under the look-alike key only (a small Latin `r` and Cyrillic `г`)
/// still get two sets (Docs/ThreatModel.md, known limits).
///
/// For a sign-in by name, a server that finds no account (or no credential) for the name starts
/// the ceremony with these in `allowCredentials`, for the stand-in user handle, and answers as it
/// would for a real account: the options then tell a stranger nothing about which names exist.
/// Any response to them fails as a bad response for a real account does.
///
/// ```swift
/// let standIns = try StandInCredentials(secret: serverSecret)  // 32 bytes or more, kept across restarts
/// let found = try await accounts.account(named: name)
/// let options = try await engine.startAuthentication(
///     userHandle: found?.id ?? standIns.userHandle(for: name),
///     binding: binding, allowCredentials: found == nil ? standIns.credentials(for: name) : nil)
/// ```
public struct StandInCredentials: Sendable {
    /// The secret, keyed once for the several MACs of every stand-in.
    let key: HMACKey

    /// Stand-ins derived from `secret` (at least 32 bytes; `configuration_invalid` otherwise):
    /// the same secret gives the same stand-ins for a name, on every instance.
    public init(secret: [UInt8]) throws(WebAuthnError) {
        guard secret.count >= 32 else {
            throw WebAuthnError(.configurationInvalid, "the stand-in secret is \(secret.count) bytes; at least 32 are needed")
        }
        self.key = HMACKey(secret)
    }

    /// The user handle a stand-in ceremony is started for (no account has it:
    /// handles of real accounts are random, and a lookup of it finds nothing).
    public func userHandle(for name: String) -> [UInt8] {
        key.authenticate(Array("webauthn stand-in handle".utf8), Array(UserName.capitalsKey(name).utf8))
    }

    /// One or two descriptors shaped like real ones (passkey or security-key
    /// ID lengths, plausible transports).
    public func credentials(for name: String) -> [CredentialDescriptor] {
        let seed = key.authenticate(Array("webauthn stand-in credentials".utf8), Array(UserName.capitalsKey(name).utf8))
        let count = 1 + Int(seed[0] & 1)
        let transports: [[AuthenticatorTransport]] = [[.hybrid, .internal], [.usb], [.internal], [.nfc, .usb], []]
        let lengths = [16, 20, 32, 48, 64]
        return (0..<count).map { i in
            let length = lengths[Int(seed[1 + i]) % lengths.count]
            let nonce = Array(key.authenticate(Array("webauthn stand-in id".utf8), seed, [UInt8(i)]).prefix(8))
            return CredentialDescriptor(id: nonce + tag(nonce, length: length - 8), transports: transports[Int(seed[3 + i]) % transports.count])
        }
    }

    /// A stand-in ID is 8 bytes and their HMAC tag, so the server knows its
    /// own stand-ins (and refuses to register one, as if it were taken)
    /// without remembering any.
    public func isStandIn(_ id: [UInt8]) -> Bool {
        guard (16...64).contains(id.count) else { return false }
        let nonce = Array(id[0..<8])
        return tag(nonce, length: id.count - 8) == Array(id[8...])
    }

    func tag(_ nonce: [UInt8], length: Int) -> [UInt8] {
        var out: [UInt8] = []
        var block: UInt8 = 0
        while out.count < length {
            out += key.authenticate(Array("webauthn stand-in tag".utf8), nonce, [block])
            block &+= 1
        }
        return Array(out.prefix(length))
    }
}
