import Foundation
@testable @_spi(Testing) import WebAuthnCore

/// A tiny DER writer for test certificates' extension values.
enum DERWriter {
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + length(content.count) + content }
    static func length(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        if n < 0x100 { return [0x81, UInt8(n)] }
        return [0x82, UInt8(n >> 8), UInt8(n & 0xff)]
    }
    static func sequence(_ items: [UInt8]...) -> [UInt8] { tlv(0x30, items.flatMap { $0 }) }
    static func set(_ items: [UInt8]...) -> [UInt8] { tlv(0x31, items.flatMap { $0 }) }
    static func octets(_ bytes: [UInt8]) -> [UInt8] { tlv(0x04, bytes) }
    static func utf8(_ s: String) -> [UInt8] { tlv(0x0C, Array(s.utf8)) }
    static func integer(_ v: Int) -> [UInt8] { v < 0x80 ? tlv(0x02, [UInt8(v)]) : tlv(0x02, [UInt8(v >> 8), UInt8(v & 0xff)]) }
    static func enumerated(_ v: Int) -> [UInt8] { tlv(0x0A, [UInt8(v)]) }
    static func null() -> [UInt8] { [0x05, 0x00] }
    static func boolean(_ b: Bool) -> [UInt8] { [0x01, 0x01, b ? 0xff : 0x00] }
    static func oid(_ dotted: String) -> [UInt8] {
        let arcs = dotted.split(separator: ".").map { UInt64($0)! }
        var out: [UInt8] = [UInt8(arcs[0] * 40 + arcs[1])]
        for arc in arcs.dropFirst(2) {
            var chunk: [UInt8] = [UInt8(arc & 0x7f)]
            var v = arc >> 7
            while v > 0 { chunk.insert(UInt8(v & 0x7f) | 0x80, at: 0); v >>= 7 }
            out += chunk
        }
        return tlv(0x06, out)
    }
    /// A context-specific EXPLICIT tag ([n], constructed), including tag numbers above 30.
    static func explicit(_ n: Int, _ content: [UInt8]) -> [UInt8] {
        if n < 31 { return tlv(0xA0 | UInt8(n), content) }
        var number: [UInt8] = [UInt8(n & 0x7f)]
        var v = n >> 7
        while v > 0 { number.insert(UInt8(v & 0x7f) | 0x80, at: 0); v >>= 7 }
        return [0xBF] + number + length(content.count) + content
    }

    static let basicConstraintsCAFalse = sequence()
    static let basicConstraintsCATrue = sequence(boolean(true))
    static func aaguid(_ bytes: [UInt8]) -> [UInt8] { octets(bytes) }
    /// SAN with a directoryName holding the TPM attributes (each in its own RDN).
    static func tpmSAN(manufacturer: String? = "id:FFFFF1D0", model: String? = "FIDO-TPM", version: String? = "id:00020008") -> [UInt8] {
        var rdns: [UInt8] = []
        for (oid, value) in [("2.23.133.2.1", manufacturer), ("2.23.133.2.2", model), ("2.23.133.2.3", version)] {
            if let value { rdns += set(sequence(self.oid(oid), utf8(value))) }
        }
        return sequence(explicit(4, sequence(rdns)))
    }
    static func extendedKeyUsage(_ oids: String...) -> [UInt8] { sequence(oids.flatMap { oid($0) }) }
}

/// A W3C vector's registration taken apart, to break one requirement and
/// put it back together (re-signing with the vector's published keys).
struct W3CFixture {
    let setup: W3CVectorTests.Setup
    let vector: JSONValue
    var clientDataJSON: [UInt8]
    var authData: [UInt8]
    var format: String
    var statement: CBOR
    let id: [UInt8]

    init(_ file: String) {
        setup = W3CVectorTests.setup(file)
        vector = setup.vector
        let response = try! RegistrationResponse(json: vector["webauthn_json"]!["registration"]!)
        let object = try! CBORDecoder.decode(response.attestationObject)
        clientDataJSON = response.clientDataJSON
        authData = object["authData"]!.bytesValue!
        format = object["fmt"]!.textValue!
        statement = object["attStmt"]!
        id = response.id
    }

    var caKey: SigningKey { try! .p256(privateScalar: Vectors.hex(Vectors.load("w3c/w3c-attestation-ca.json")["spec_fields"]!["attestation_ca_key"])) }
    var attestationKey: SigningKey { try! .p256(privateScalar: Vectors.hex(vector["registration"]!["spec_fields"]!["attestation_private_key"])) }
    var credentialKey: SigningKey { try! .p256(privateScalar: Vectors.hex(vector["registration"]!["spec_fields"]!["credential_private_key"])) }
    var clientDataHash: [UInt8] { Digest.sha256(clientDataJSON) }
    var aaguid: [UInt8] { Array(authData[37..<53]) }

    /// Replaces one attStmt member.
    mutating func set(_ key: String, _ value: CBOR) {
        var pairs = statement.mapValue!.filter { $0.key != .text(key) }
        pairs.append(CBORPair(.text(key), value))
        statement = .map(pairs)
    }

    mutating func remove(_ key: String) { statement = .map(statement.mapValue!.filter { $0.key != .text(key) }) }

    /// Issues a leaf for `key` under the W3C CA.
    func issue(_ builder: CertificateBuilder, key: SigningKey) -> [UInt8] {
        try! builder.build(key: key, issuer: W3CVectorTests.attestationCA, issuerKey: caKey).der
    }

    var response: RegistrationResponse {
        let object = CBOR.map([CBORPair(.text("fmt"), .text(format)), CBORPair(.text("attStmt"), statement), CBORPair(.text("authData"), .bytes(authData))])
        return RegistrationResponse(id: id, clientDataJSON: clientDataJSON, attestationObject: CBOREncoder.encode(object))
    }

    func verify(_ policy: ((inout VerificationPolicy) -> Void)? = nil, anchors: TrustAnchors? = nil) throws -> RegistrationResult {
        var rp = setup.rp
        if policy != nil || anchors != nil {
            var p = rp.policy
            policy?(&p)
            rp = try RelyingParty(id: rp.id, origins: rp.origins, policy: p, clock: rp.clock, trustAnchors: anchors ?? rp.trustAnchors)
        }
        return try RegistrationVerifier.verify(response, ceremony: setup.registrationCeremony, relyingParty: rp)
    }

    func code(_ policy: ((inout VerificationPolicy) -> Void)? = nil, anchors: TrustAnchors? = nil) -> String? {
        errorCode { _ = try verify(policy, anchors: anchors) }
    }
}
