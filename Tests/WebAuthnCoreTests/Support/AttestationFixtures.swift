import Foundation
@testable import WebAuthnCore
import WebAuthnTesting
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

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
