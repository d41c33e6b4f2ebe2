import Foundation
@testable import WebAuthnCore
@testable import _WebAuthnEncoding
@testable import _WebAuthnCrypto
@testable import WebAuthnMetadata
@testable import WebAuthnTesting

// MARK: Attestation statement formats

/// A format's verification procedure on a whole attestation object. Input:
/// clientDataHash (32 bytes) ‖ attestationObject (CBOR). The format is the
/// target's, whatever `fmt` says; a statement that verifies then has its trust
/// assessed (certificate validity, path validation, metadata).
func formatTarget(_ verifier: any AttestationFormatVerifier.Type) -> FuzzTarget {
    FuzzTarget(name: verifier.identifier.rawValue, input: "clientDataHash (32 bytes) ‖ attestationObject, verified as \(verifier.identifier)") { data in
        guard data.count > 32 else { return }
        let clientDataHash = Array(data[0..<32])
        guard let object = try? AttestationObject(bytes: Array(data[32...])), let attested = object.authenticatorData.attestedCredentialData else { return }
        let rp = Fixtures.relyingParty
        let input = AttestationInput(
            statement: object.statement, authenticatorData: object.authenticatorData,
            clientDataHash: clientDataHash, policy: rp.policy, now: Fixtures.now)
        let verification: AttestationVerification
        do { verification = try verifier.verify(input) } catch {
            note(verifier.identifier.rawValue, "statement: " + describe(error))
            return
        }
        do {
            let (trust, type) = try RegistrationVerifier.assessTrustworthiness(verification, format: verifier.identifier, aaguid: attested.aaguid, rp: rp)
            note(verifier.identifier.rawValue, "verified: \(type.rawValue), trusted \(trust.trusted)")
        } catch { note(verifier.identifier.rawValue, "trust: " + describe(error)) }
    }
}

/// The fixed authenticator data the SafetyNet payload target signs for.
let safetyNetAuthenticatorData: AuthenticatorData = {
    let key = Fixtures.credentialKeys[0]
    do {
        let parts = AuthenticatorDataParts(
            rpId: Fixtures.rpId, flags: [.userPresent, .attestedCredentialData], signCount: 0,
            attested: .init(aaguid: [UInt8](repeating: 0, count: 16), credentialId: key.id, publicKey: try key.key.coseKey()))
        return try AuthenticatorData(bytes: parts.bytes)
    } catch { fatalError("SafetyNet authenticator data: \(error)") }
}()

/// The JWS header: RS256, x5c = the fuzz SafetyNet certificate and root (base64url, made once).
let safetyNetJWSHeader: String = {
    let header: JSONValue = [
        "alg": "RS256", "x5c": .array([Fixtures.safetyNetCertificate, Fixtures.authority.root].map { .string(Data($0.der).base64EncodedString()) }),
    ]
    return Base64URL.encode(header.serializedBytes())
}()

/// A compact JWS over `payload` (raw bytes), signed by the fuzz SafetyNet key.
func signedSafetyNetJWS(payload: [UInt8]) -> [UInt8] {
    let input = Array((safetyNetJWSHeader + "." + Base64URL.encode(payload)).utf8)
    guard let signature = try? Fixtures.jwsSigner.sign(input) else { finding("signing a JWS failed") }
    return input + Array(".".utf8) + Array(Base64URL.encode(signature).utf8)
}

let attestationTargets: [FuzzTarget] = [
    formatTarget(PackedAttestation.self),
    formatTarget(FIDOU2FAttestation.self),
    formatTarget(TPMAttestation.self),
    formatTarget(AndroidKeyAttestation.self),
    formatTarget(AndroidSafetyNetAttestation.self),
    formatTarget(AppleAttestation.self),
    formatTarget(CompoundAttestation.self),
    FuzzTarget(name: "tpm-structures", input: "a selector byte (even: TPMT_PUBLIC, odd: TPMS_ATTEST) ‖ the structure") { data in
        guard let selector = data.first else { return }
        let bytes = Array(data.dropFirst())
        if selector & 1 == 0 {
            guard let pubArea = try? TPM.Public(bytes) else { return }
            for credential in Fixtures.credentials {
                _ = try? TPMAttestation.checkPubAreaKey(pubArea, credential: credential.publicKey)
            }
        } else {
            _ = try? TPM.Attest(bytes)
        }
    },
    FuzzTarget(name: "android-key-description", input: "the KeyDescription extension's DER (Android key attestation)") { data in
        guard let description = try? AndroidKeyAttestation.KeyDescription(der: data.bytes) else { return }
        _ = try? AndroidKeyAttestation.checkOriginAndPurpose(description, enforcement: .teeOrSoftware)
        _ = try? AndroidKeyAttestation.checkOriginAndPurpose(description, enforcement: .trustedExecutionEnvironment)
    },
    FuzzTarget(name: "safetynet-jws", input: "a compact JWS as android-safetynet's response carries it (header, payload, signature)") { data in
        guard let jws = try? JWS(compact: data.bytes) else { return }
        if let x5c = jws.header["x5c"]?.arrayValue {
            for item in x5c.prefix(8) {
                if let text = item.stringValue, let der = Data(base64Encoded: text), let cert = try? X509Certificate(der: [UInt8](der)) {
                    _ = cert.matchesHost(AndroidSafetyNetAttestation.hostname)
                    if let key = try? cert.publicKey() { _ = try? jws.verifySignature(with: key) }
                }
            }
        }
        // The signature is checked against keys of every kind, whatever the header says.
        for credential in Fixtures.credentials { _ = try? jws.verifySignature(with: credential.publicKey.publicKey) }
    },
    FuzzTarget(
        name: "safetynet-payload", input: "the JSON payload of a SafetyNet JWS; the target signs it (RS256, CN attest.android.com) and verifies the statement"
    ) { data in
        let jws = signedSafetyNetJWS(payload: data.bytes)
        let statement = CBOR.map([CBORPair(.text("ver"), .text("14366018")), CBORPair(.text("response"), .bytes(jws))])
        for policy in [VerificationPolicy(), Fixtures.policy] {
            do {
                _ = try AndroidSafetyNetAttestation.verify(
                    AttestationInput(
                        statement: statement, authenticatorData: safetyNetAuthenticatorData, clientDataHash: Fixtures.createClientDataHash,
                        policy: policy, now: Fixtures.now))
                note("safetynet-payload", "accepted")
            } catch { note("safetynet-payload", describe(error)) }
        }
    },
]

// MARK: Certificates, CRLs, FIDO metadata

/// The CA, good and revoked leaves of TestVectors/generated/crl.
let crlFixtures: (ca: X509Certificate, good: X509Certificate, revoked: X509Certificate) = {
    func load(_ name: String) -> X509Certificate {
        let url = Fixtures.repository.appendingPathComponent("TestVectors/generated/crl/\(name)")
        guard let data = FileManager.default.contents(atPath: url.path), let cert = try? X509Certificate(pem: String(decoding: data, as: UTF8.self)) else {
            fatalError("cannot read \(url.path)")
        }
        return cert
    }
    return (load("ca.pem"), load("good.pem"), load("revoked.pem"))
}()

let trustTargets: [FuzzTarget] = [
    FuzzTarget(name: "x509", input: "a certificate, DER (or PEM): every accessor and the format certificate requirements") { data in
        let bytes = data.bytes
        let parsed: X509Certificate?
        if bytes.starts(with: Array("-----BEGIN".utf8)) {
            parsed = try? X509Certificate(pem: String(decoding: bytes, as: UTF8.self))
        } else {
            parsed = try? X509Certificate(der: bytes)
        }
        guard let cert = parsed else { return }
        _ = (cert.version, cert.subject, cert.issuer, cert.subjectSummary, cert.notBefore, cert.notAfter)
        _ = (cert.publicKeyIdentifier, cert.fingerprint, cert.pem, cert.subjectValues("CN"))
        _ = cert.matchesHost(AndroidSafetyNetAttestation.hostname)
        _ = try? cert.basicConstraints()
        _ = try? cert.checkValidity(at: Fixtures.now, role: "fuzz")
        if let key = try? cert.publicKey() {
            _ = key.verify(signature: [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01], over: bytes, algorithm: .es256)
        }
        _ = try? PackedAttestation.checkCertificateRequirements(cert)
        _ = try? PackedAttestation.checkAAGUIDExtension(cert, aaguid: .zero)
        _ = try? TPMAttestation.checkAIKCertificate(cert)
        if let ext = try? cert.extension(oid: X509Certificate.OID.androidKeyDescription) {
            _ = try? AndroidKeyAttestation.KeyDescription(der: ext.value)
        }
        if let ext = try? cert.extension(oid: "1.2.840.113635.100.8.2") {
            _ = try? AppleAttestation.nonce(from: ext.value)
        }
        _ = cert.isSigned(by: Fixtures.authority.root)
        _ = CertificateChain.validate([cert], anchors: [Fixtures.authority.root], at: Fixtures.now)
        _ = CertificateChain.validate([crlFixtures.good, cert], anchors: [crlFixtures.ca], at: Fixtures.now)
    },
    FuzzTarget(name: "crl", input: "a CRL, DER or PEM, then path validation with it") { data in
        guard let crl = try? CertificateRevocationList(derOrPEM: data.bytes) else { return }
        for leaf in [crlFixtures.good, crlFixtures.revoked] {
            _ = CertificateChain.validate([leaf], anchors: [crlFixtures.ca], crls: [crl], at: Fixtures.now)
        }
    },
    FuzzTarget(name: "metadata-blob", input: "a FIDO MDS3 BLOB JWT (x5c chain to the fuzz root, signature, payload)") { data in
        let options = FIDOMetadata.BLOBOptions(roots: [Fixtures.authority.rootCertificate], refuseStale: false)
        do {
            let metadata = try FIDOMetadata.blob(jwt: data.bytes, at: Fixtures.now, options: options)
            note("metadata-blob", "accepted: \(metadata.entries.count) entries")
        } catch { note("metadata-blob", describe(error)) }
    },
    FuzzTarget(name: "metadata-payload", input: "JSON: a decoded BLOB payload or one metadata statement (FIDOMetadata.payload, statementEntry)") { data in
        guard let json = try? FIDOMetadata.parseJSON(data.bytes) else { return }
        let entries: [MetadataEntry]
        if json["entries"] != nil {
            entries = (try? FIDOMetadata.payload(json))?.entries ?? []
        } else {
            entries = (try? FIDOMetadata.statementEntry(json, status: nil)).map { [$0] } ?? []
        }
        let anchors = TrustAnchors(metadata: entries)
        for entry in entries {
            if let aaguid = entry.aaguid { _ = anchors.entry(aaguid: aaguid, attestationCertificate: nil) }
            _ = entry.status?.isCompromised
        }
    },
]
