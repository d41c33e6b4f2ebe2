package import Foundation
public import WebAuthnCore
package import _WebAuthnEncoding
package import _WebAuthnCrypto

/// A test PKI for the software authenticator: a root, and one attestation
/// key (used for fido-u2f, packed and as the TPM AIK). Leaf certificates are
/// issued under the root as needed (per credential for apple and android-key).
/// Keep the PEMs to make the same authority again in another process.
public final class AttestationAuthority: Sendable {
    let rootKey: SigningKey
    /// The key that signs packed and fido-u2f statements and is the tpm AIK.
    package let attestationKey: SigningKey
    /// The RSA key that signs SafetyNet JWSs (made once per authority; RSA keys are slow to make).
    let safetyNetKey: SigningKey
    package let root: X509Certificate
    /// The authority's root certificate: the trust anchor for its attestations.
    public var rootCertificate: Certificate { Certificate(root) }

    /// Makes an authority again from the PEMs and root certificate of an earlier one
    /// (a fresh SafetyNet key is generated). Throws when a key or the certificate does not parse.
    ///
    /// - Parameters:
    ///   - rootKeyPEM: The root's ES256 private key, in PEM.
    ///   - rootCertificateDER: The root certificate, in DER.
    ///   - attestationKeyPEM: The attestation key, an ES256 private key in PEM.
    public init(rootKeyPEM: String, rootCertificateDER: [UInt8], attestationKeyPEM: String) throws {
        rootKey = try SigningKey(pem: rootKeyPEM, algorithm: .es256)
        attestationKey = try SigningKey(pem: attestationKeyPEM, algorithm: .es256)
        root = try X509Certificate(der: rootCertificateDER)
        safetyNetKey = try SigningKey.generate(.rs256)
    }

    /// A new root and attestation key.
    public static func generate(name: String = "webauthn test authority") throws -> AttestationAuthority {
        let rootKey = try SigningKey.generate(.es256)
        let root = try CertificateBuilder.certificateAuthority(organization: name, name: "\(name) root").build(key: rootKey, issuer: nil, issuerKey: rootKey)
        return try AttestationAuthority(
            rootKeyPEM: try rootKey.privateKeyPEM(), rootCertificateDER: root.der,
            attestationKeyPEM: try SigningKey.generate(.es256).privateKeyPEM())
    }

    /// The root's private key, in PEM (empty if it cannot be exported).
    public var rootKeyPEM: String { (try? rootKey.privateKeyPEM()) ?? "" }
    /// The attestation private key, in PEM (empty if it cannot be exported).
    public var attestationKeyPEM: String { (try? attestationKey.privateKeyPEM()) ?? "" }

    /// SHA-1 of the attestation key, as FIDO metadata names U2F authenticators.
    public var attestationKeyIdentifier: String { (try? u2fCertificate().publicKeyIdentifier) ?? nil ?? "" }

    /// A FIDO MDS3 metadata statement for an authenticator of this authority, with
    /// this root as its attestation root: give it to a relying party (this engine's
    /// `FIDOMetadata.load`, or any MDS3 consumer) to trust the authority's attestations.
    /// Name the authenticator by `aaguid`, or with nil by this authority's attestation
    /// key identifier (as MDS3 names U2F authenticators).
    package func metadataStatement(aaguid: AAGUID?, description: String, attestationTypes: [String] = ["basic_full"]) -> JSONValue {
        var statement: JSONObject = [
            "description": .string(description), "attestationTypes": .array(attestationTypes.map { .string($0) }),
            "attestationRootCertificates": [.string(Data(root.der).base64EncodedString())],
        ]
        if let aaguid {
            statement["aaguid"] = .string(aaguid.description)
        } else {
            statement["attestationCertificateKeyIdentifiers"] = [.string(attestationKeyIdentifier)]
        }
        return .object(statement)
    }

    func issue(_ builder: CertificateBuilder, for key: SigningKey) throws -> X509Certificate {
        var b = builder
        b.serial = UInt64.random(in: 2...UInt64.max / 2)
        return try b.build(key: key, issuer: root, issuerKey: rootKey)
    }

    func u2fCertificate() throws -> X509Certificate {
        try issue(CertificateBuilder(subject: [("CN", "U2F Test Attestation")]), for: attestationKey)
    }

    /// A packed attestation certificate that meets §8.2.1: subject C, O,
    /// OU "Authenticator Attestation", CN; basic constraints CA false; the AAGUID extension.
    static func packedCertificateTemplate(aaguid: [UInt8]) -> CertificateBuilder {
        var b = CertificateBuilder(subject: [("C", "AA"), ("O", "WebAuthn Testing"), ("OU", "Authenticator Attestation"), ("CN", "Packed Test Authenticator")])
        b.extensions = [
            (X509Certificate.OID.basicConstraints, true, DERWriter.basicConstraintsCAFalse),
            (X509Certificate.OID.fidoGenCeAAGUID, false, DERWriter.aaguid(aaguid)),
        ]
        return b
    }

    func packedCertificate(aaguid: [UInt8]) throws -> X509Certificate {
        try issue(Self.packedCertificateTemplate(aaguid: aaguid), for: attestationKey)
    }

    /// Packed full attestation under this root whose certificate is the §8.2.1
    /// template after `change`, to break one requirement on purpose. It is signed
    /// by the attestation key unless `signer` is given; `rootFirst` sends the root before the leaf.
    /// With `intermediateNotAfter`, the leaf is issued by an intermediate CA (valid until
    /// then) that x5c carries after it; `includeRoot` appends the root to x5c.
    package func packedAttestation(
        aaguid: [UInt8], signer: SigningKey? = nil, rootFirst: Bool = false, intermediateNotAfter: Date? = nil,
        includeRoot: Bool = false,
        certificate change: (inout CertificateBuilder) -> Void = { _ in }
    ) throws -> SoftwareAuthenticator.Attestation {
        var template = Self.packedCertificateTemplate(aaguid: aaguid)
        change(&template)
        var x5c: [[UInt8]]
        if let notAfter = intermediateNotAfter {
            let caKey = try SigningKey.generate(.es256)
            var ca = CertificateBuilder.certificateAuthority(organization: "WebAuthn Testing", name: "Packed Test Intermediate CA")
            ca.notAfter = notAfter
            let intermediate = try issue(ca, for: caKey)
            template.serial = UInt64.random(in: 2...UInt64.max / 2)
            x5c = [try template.build(key: attestationKey, issuer: intermediate, issuerKey: caKey).der, intermediate.der]
        } else {
            x5c = [try issue(template, for: attestationKey).der]
        }
        if includeRoot { x5c.append(root.der) }
        if rootFirst { x5c.insert(root.der, at: 0) }
        return .packed(x5c: x5c, signer: AttestationSigner(key: signer ?? attestationKey))
    }

    func aikCertificate(aaguid: [UInt8], key: SigningKey? = nil) throws -> X509Certificate {
        var b = CertificateBuilder()
        b.extensions = [
            (X509Certificate.OID.subjectAltName, true, DERWriter.tpmSAN()),
            (X509Certificate.OID.extendedKeyUsage, false, DERWriter.extendedKeyUsage(X509Certificate.OID.tcgKpAIKCertificate)),
            (X509Certificate.OID.basicConstraints, true, DERWriter.basicConstraintsCAFalse),
            (X509Certificate.OID.fidoGenCeAAGUID, false, DERWriter.aaguid(aaguid)),
        ]
        return try issue(b, for: key ?? attestationKey)
    }
}
