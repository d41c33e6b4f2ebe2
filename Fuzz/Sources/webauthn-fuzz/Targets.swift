import Foundation
@testable import WebAuthnCore
@testable import _WebAuthnEncoding
@testable import _WebAuthnCrypto
@testable import WebAuthnMetadata
@testable import WebAuthnTesting

/// One fuzz target: a name (FUZZ_TARGET), what its input is, and the function
/// libFuzzer calls with each input. A target must never crash: every failure
/// the engine reports is a thrown `WebAuthnError`, which the target ignores.
/// A crash, a sanitizer report, or a broken round-trip property is a finding.
struct FuzzTarget: Sendable {
    let name: String
    let input: String
    let run: @Sendable (UnsafeBufferPointer<UInt8>) -> Void
}

/// Every target, in the order `make fuzz` runs them.
let allTargets: [FuzzTarget] = parserTargets + attestationTargets + trustTargets + ceremonyTargets

/// FUZZ_DEBUG=1 prints each input's outcome (to check that seeds get as deep as intended).
let debugOutput = ProcessInfo.processInfo.environment["FUZZ_DEBUG"] != nil

func note(_ target: String, _ outcome: @autoclosure () -> String) {
    if debugOutput { print("[\(target)] \(outcome())") }
}

func describe(_ error: (any Error)?) -> String {
    guard let error else { return "accepted" }
    if let e = error as? WebAuthnError { return "\(e.code.rawValue): \(e.message.prefix(160))" }
    return "\(error)"
}

/// Stops the run with a message libFuzzer records with the crashing input.
func finding(_ message: @autoclosure () -> String) -> Never {
    fatalError("fuzz property violated: \(message())")
}

extension UnsafeBufferPointer where Element == UInt8 {
    var bytes: [UInt8] { Array(self) }
}

// MARK: Parsers that client bytes reach

let parserTargets: [FuzzTarget] = [
    FuzzTarget(name: "json", input: "any bytes, parsed as a JSON request body (JSONValue.parse)") { data in
        guard let value = try? JSONValue.parse(data.bytes) else { return }
        // What the engine serializes it parses back to the same value.
        let text = value.serializedBytes()
        guard let again = try? JSONValue.parse(text, limits: JSONLimits(maxBytes: 1 << 20, maxDepth: 64)) else {
            finding("serialized JSON does not parse: \(String(decoding: text.prefix(200), as: UTF8.self))")
        }
        guard again == value else { finding("JSON round trip changed the value") }
    },
    FuzzTarget(name: "base64url", input: "any bytes, decoded as base64url (Base64URL.decode)") { data in
        // The buffer libFuzzer passes is exactly the input: ASan sees any read past it.
        let decoded = Base64URL.decode(utf8: data)
        let viaString = Base64URL.decode(String(decoding: data, as: UTF8.self))
        if let decoded {
            guard Base64URL.decode(Base64URL.encode(decoded)) == decoded else { finding("base64url round trip changed the bytes") }
            guard viaString == decoded else { finding("decode(String) and decode(utf8:) disagree") }
        }
    },
    FuzzTarget(name: "cbor", input: "any bytes, decoded as CBOR (CBORDecoder.decode, libcbor)") { data in
        let bytes = data.bytes
        _ = try? CBORDecoder.decodePrefix(bytes, from: 0)
        guard let value = try? CBORDecoder.decode(bytes) else { return }
        // The engine's encoder writes what its decoder reads back. The encoder sorts
        // map keys canonically (the decoder keeps their order), so the property is
        // on bytes: encoding what was decoded from an encoding gives the same bytes.
        let encoded = CBOREncoder.encode(value)
        guard let again = try? CBORDecoder.decode(encoded, limits: CBORLimits(maxBytes: 1 << 20)) else {
            finding("re-encoded CBOR does not decode")
        }
        guard CBOREncoder.encode(again) == encoded else { finding("CBOR round trip changed the value") }
    },
    FuzzTarget(name: "der", input: "any bytes, read by the engine's DER reader (DER.parse, walked to the leaves)") { data in
        guard let root = try? DER.parse(data.bytes) else { return }
        func walk(_ node: DER.Node, depth: Int) {
            _ = try? node.integer()
            _ = try? node.objectIdentifier()
            guard depth < 32, node.isConstructed, let children = try? node.children() else { return }
            for child in children { walk(child, depth: depth + 1) }
        }
        walk(root, depth: 0)
        _ = try? TPMAttestation.directoryNameAttributes(data.bytes)
        _ = try? TPMAttestation.extendedKeyUsages(data.bytes)
        _ = try? AppleAttestation.nonce(from: data.bytes)
    },
    FuzzTarget(name: "client-data", input: "clientDataJSON bytes (CollectedClientData), then the client data steps of §7.1 and §7.2") { data in
        guard let c = try? CollectedClientData(bytes: data.bytes) else { return }
        let rp = Fixtures.relyingParty
        for (type, step) in [("webauthn.create", "§7.1"), ("webauthn.get", "§7.2")] {
            _ = try? ClientDataChecks.verifyType(c, expected: type, step: step)
        }
        _ = try? ClientDataChecks.verifyChallenge(c, expected: Fixtures.challenge, step: "")
        _ = try? ClientDataChecks.verifyOrigin(c, rp: rp, step: "")
        for policy in [CrossOriginPolicy.deny, .allowAnyTopOrigin, .allowTopOrigins(["https://example.org"])] {
            _ = try? ClientDataChecks.verifyCrossOrigin(c, policy: policy, step: "")
            _ = try? ClientDataChecks.verifyTopOrigin(c, policy: policy, step: "")
        }
    },
    FuzzTarget(name: "authenticator-data", input: "authenticator data bytes (AuthenticatorData(bytes:), with its COSE key and extensions)") { data in
        guard let authData = try? AuthenticatorData(bytes: data.bytes) else { return }
        _ = authData.attestedCredentialData?.aaguid.description
        if let key = authData.attestedCredentialData?.publicKey {
            _ = key.publicKey.subjectPublicKeyInfo
        }
        _ = try? AuthenticatorDataChecks.verifyRpIdHash(authData, rp: Fixtures.relyingParty, step: "")
        _ = try? AuthenticatorDataChecks.verifyBackupFlags(authData, step: "")
    },
    FuzzTarget(name: "cose-key", input: "a COSE_Key in CBOR (COSEKey(bytes:)): import into OpenSSL, then one verification") { data in
        guard let key = try? COSEKey(bytes: data.bytes) else { return }
        // An imported key of any accepted shape verifies (and refuses) without crashing.
        _ = key.publicKey.verify(signature: [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01], over: data.bytes, algorithm: key.algorithm)
        _ = key.publicKey.verify(signature: [UInt8](repeating: 0x5a, count: 256), over: data.bytes, algorithm: key.algorithm)
    },
]
