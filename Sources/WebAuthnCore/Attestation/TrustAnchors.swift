public import _WebAuthnEncoding
package import _WebAuthnCrypto

/// An authenticator status from FIDO metadata status reports (MDS3 §3.1.4).
public struct AuthenticatorStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The status as MDS3 writes it, such as `FIDO_CERTIFIED_L1` or `REVOKED`.
    public let rawValue: String
    /// A status from its MDS3 name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The MDS3 name.
    public var description: String { rawValue }

    /// Statuses that mean the authenticator's attestation can no longer be
    /// trusted; a policy that requires trust refuses them.
    public static let compromised: Set<String> = [
        "REVOKED", "USER_VERIFICATION_BYPASS", "ATTESTATION_KEY_COMPROMISE",
        "USER_KEY_REMOTE_COMPROMISE", "USER_KEY_PHYSICAL_COMPROMISE",
    ]
    /// Whether the status is one of ``compromised``.
    public var isCompromised: Bool { Self.compromised.contains(rawValue) }
}

/// What the engine uses of a FIDO metadata entry (an MDS3 BLOB entry or a
/// metadata statement): which authenticator, its attestation roots, its status.
public struct MetadataEntry: Sendable {
    /// The authenticator model; nil for U2F authenticators, which are identified by key identifiers.
    public let aaguid: AAGUID?
    /// SHA-1 of the attestation certificate's public key, lowercase hex (U2F authenticators).
    public let attestationCertificateKeyIdentifiers: [String]
    /// The authenticator's name, as the metadata describes it.
    public let description: String
    /// `basic_full`, `basic_surrogate`, `attca`, `anonca`, `none`.
    public let attestationTypes: [String]
    package let attestationRootCertificates: [X509Certificate]
    /// The latest status report's status, if any.
    public let status: AuthenticatorStatus?

    /// The attestation roots of this authenticator (they apply to it only).
    public var rootCertificates: [Certificate] { attestationRootCertificates.map(Certificate.init) }

    /// An entry; key identifiers are lowercased.
    ///
    /// - Parameters:
    ///   - aaguid: The authenticator model; nil for a U2F authenticator.
    ///   - attestationCertificateKeyIdentifiers: SHA-1 key identifiers of U2F attestation certificates, in hex.
    ///   - description: The authenticator's name.
    ///   - attestationTypes: The MDS3 attestation type names.
    ///   - rootCertificates: The attestation roots of this authenticator.
    ///   - status: The latest status report's status, if any.
    public init(
        aaguid: AAGUID?, attestationCertificateKeyIdentifiers: [String] = [], description: String,
        attestationTypes: [String] = [], rootCertificates: [Certificate], status: AuthenticatorStatus? = nil
    ) {
        self.init(
            aaguid: aaguid, attestationCertificateKeyIdentifiers: attestationCertificateKeyIdentifiers, description: description,
            attestationTypes: attestationTypes, attestationRootCertificates: rootCertificates.map(\.x509), status: status)
    }

    package init(
        aaguid: AAGUID?, attestationCertificateKeyIdentifiers: [String] = [], description: String,
        attestationTypes: [String] = [], attestationRootCertificates: [X509Certificate], status: AuthenticatorStatus? = nil
    ) {
        self.aaguid = aaguid
        self.attestationCertificateKeyIdentifiers = attestationCertificateKeyIdentifiers.map { $0.lowercased() }
        self.description = description
        self.attestationTypes = attestationTypes
        self.attestationRootCertificates = attestationRootCertificates
        self.status = status
    }
}

/// Where attestation trust comes from: root certificates per attestation
/// format, FIDO metadata entries (their roots apply to their authenticator
/// only), and CRLs checked during path validation.
public struct TrustAnchors: Sendable {
    package var formatRoots: [AttestationFormat: [X509Certificate]]
    /// The FIDO metadata entries, in the order added.
    public private(set) var metadata: [MetadataEntry]
    package var crls: [CertificateRevocationList]
    private var byAAGUID: [AAGUID: Int] = [:]
    private var byKeyIdentifier: [String: Int] = [:]

    /// Anchors from root certificates keyed by attestation format (`packed`,
    /// `tpm`, `apple`, ...), metadata entries, and CRLs.
    public init(roots: [AttestationFormat: [Certificate]] = [:], metadata: [MetadataEntry] = [], revocationLists: [RevocationList] = []) {
        self.init(formatRoots: roots.mapValues { $0.map(\.x509) }, metadata: metadata, crls: revocationLists.map(\.crl))
    }

    /// The root certificates for each attestation format.
    public var roots: [AttestationFormat: [Certificate]] {
        get { formatRoots.mapValues { $0.map(Certificate.init) } }
        set { formatRoots = newValue.mapValues { $0.map(\.x509) } }
    }

    /// Adds CRLs checked during path validation.
    public mutating func add(_ lists: [RevocationList]) { crls += lists.map(\.crl) }

    package init(formatRoots: [AttestationFormat: [X509Certificate]], metadata: [MetadataEntry] = [], crls: [CertificateRevocationList] = []) {
        self.formatRoots = formatRoots
        self.metadata = []
        self.crls = crls
        add(metadata)
    }

    /// Adds metadata entries (a later entry for the same AAGUID replaces an earlier one).
    public mutating func add(_ entries: [MetadataEntry]) {
        for entry in entries {
            metadata.append(entry)
            if let aaguid = entry.aaguid { byAAGUID[aaguid] = metadata.count - 1 }
            for id in entry.attestationCertificateKeyIdentifiers { byKeyIdentifier[id] = metadata.count - 1 }
        }
    }

    /// The roots that ship with the engine: the Apple WebAuthn root (`apple`),
    /// the Google hardware attestation roots (`android-key`) and GlobalSign
    /// Root CA (`android-safetynet`). No metadata.
    public static let builtIn: TrustAnchors = {
        func pem(_ text: String) -> X509Certificate { try! X509Certificate(pem: text) }
        return TrustAnchors(formatRoots: [
            .apple: [pem(KnownRoots.appleWebAuthnRoot)],
            .androidKey: [
                pem(KnownRoots.googleHardwareAttestationRoot2016), pem(KnownRoots.googleHardwareAttestationRoot2019),
                pem(KnownRoots.googleHardwareAttestationRoot2021), pem(KnownRoots.googleHardwareAttestationRoot2022),
                pem(KnownRoots.googleKeyAttestationCA1),
            ],
            .androidSafetyNet: [pem(KnownRoots.globalSignRootCA)],
        ])
    }()

    /// No anchors at all: every certificate chain is untrusted.
    public static let empty = TrustAnchors()

    /// The metadata entry for an authenticator: by AAGUID, or for U2F (zero
    /// AAGUID) by the SHA-1 key identifier of its attestation certificate.
    package func entry(aaguid: AAGUID, attestationCertificate: X509Certificate?) -> MetadataEntry? {
        if !aaguid.isZero { return byAAGUID[aaguid].map { metadata[$0] } }
        guard let cert = attestationCertificate, let id = cert.publicKeyIdentifier else { return nil }
        return byKeyIdentifier[id].map { metadata[$0] }
    }
}
