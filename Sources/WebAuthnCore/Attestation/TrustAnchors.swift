public import Foundation
internal import _WebAuthnEncoding
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
    /// `REVOKED`: final, superseded by no later report.
    public static let revoked = AuthenticatorStatus(rawValue: "REVOKED")
    /// `ATTESTATION_KEY_COMPROMISE`: the key of the report's certificate is known to others; it
    /// is refused under whatever model it is presented for.
    public static let attestationKeyCompromise = AuthenticatorStatus(rawValue: "ATTESTATION_KEY_COMPROMISE")
    /// Whether the status is one of ``compromised``.
    public var isCompromised: Bool { Self.compromised.contains(rawValue) }

    /// The statuses MDS3 defines (§3.1.4).
    public static let known: Set<String> = compromised.union([
        "NOT_FIDO_CERTIFIED", "FIDO_CERTIFIED", "UPDATE_AVAILABLE", "SELF_ASSERTION_SUBMITTED", "FIDO_CERTIFIED_L1",
        "FIDO_CERTIFIED_L1plus", "FIDO_CERTIFIED_L2", "FIDO_CERTIFIED_L2plus", "FIDO_CERTIFIED_L3", "FIDO_CERTIFIED_L3plus",
    ])
    /// Whether MDS3 defines the status. A report of another status is not taken into account.
    public var isKnown: Bool { Self.known.contains(rawValue) }
}

/// One FIDO metadata status report (MDS3 §3.1.3): a status and the day it takes effect.
public struct StatusReport: Sendable, Hashable {
    /// The status reported.
    public let status: AuthenticatorStatus
    /// When the status takes effect (MDS3 `effectiveDate`, a day, read as midnight UTC);
    /// nil: the report gives no date and applies at any time.
    public let effectiveDate: Date?
    /// The key identifier (SHA-1 of the public key, lowercase hex) of the certificate the report
    /// names (MDS3 `certificate`, as an `ATTESTATION_KEY_COMPROMISE` may): a compromise reported
    /// with one applies to every chain with that key, whatever authenticator it claims to be.
    public let certificateKeyIdentifier: String?

    /// A report of `status` that applies from `effectiveDate` (nil: at any time), naming the
    /// certificate whose key has `certificateKeyIdentifier`, if any.
    public init(status: AuthenticatorStatus, effectiveDate: Date? = nil, certificateKeyIdentifier: String? = nil) {
        self.status = status
        self.effectiveDate = effectiveDate
        self.certificateKeyIdentifier = certificateKeyIdentifier
    }
}

/// What the engine uses of a FIDO metadata entry (an MDS3 BLOB entry or a
/// metadata statement): which authenticator, its attestation roots, its dated
/// status reports, and how to name it to users.
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
    /// The status reports, as listed; ``status(at:)`` says which one applies at a time.
    public let statusReports: [StatusReport]
    /// The authenticator's name by language tag (MDS3 `friendlyNames`, such as `"en-US"`), for showing to users.
    public let friendlyNames: [String: String]
    /// The authenticator's icon as the metadata gives it: a `data:` URL (PNG), or nil.
    public let icon: String?

    /// The attestation roots of this authenticator (they apply to it only).
    public var rootCertificates: [Certificate] { attestationRootCertificates.map(Certificate.init) }

    /// The status of the latest report (by effective date, an undated report counting as
    /// the earliest), whether or not it has taken effect; see ``status(at:)`` for the one that applies.
    public var status: AuthenticatorStatus? { Self.latest(statusReports)?.status }

    /// The status that applies at `time`: that of the latest report whose effective date is
    /// not after `time` (an undated report applies at any time, before every dated one). A
    /// report dated in the future does not apply yet. Of reports with the same date, a
    /// compromised status wins, then the one listed last. An undated compromise (no date, or
    /// one that could not be read) applies at any time and is superseded by nothing: ordered
    /// before every dated report, it lost to any certification (red team, sixteenth pass).
    /// A `REVOKED` report, once in effect, is likewise superseded by nothing.
    public func status(at time: Date) -> AuthenticatorStatus? { statusReport(at: time)?.status }

    /// The report that applies at `time` (see ``status(at:)``), with its effective date.
    public func statusReport(at time: Date) -> StatusReport? {
        Self.latest(statusReports.filter { ($0.effectiveDate ?? .distantPast) <= time })
    }

    static func latest(_ reports: [StatusReport]) -> StatusReport? {
        // A status MDS3 does not define (`revoked`, `REVOKED `) says nothing: taken as no
        // compromise, a later one lifted a revocation (red team, sixteenth pass).
        let reports = reports.filter(\.status.isKnown)
        if let undated = reports.last(where: { $0.effectiveDate == nil && $0.status.isCompromised }) { return undated }
        // A revocation is final: MDS3 gives no way back from `REVOKED`, so a later report (an
        // `UPDATE_AVAILABLE`, or a certification in an unsigned `--metadata` payload merged with a
        // signed BLOB) does not lift it (red team, sixteenth pass).
        if let revoked = reports.first(where: { $0.status == .revoked }) { return revoked }
        var best: StatusReport?
        for report in reports {
            guard let current = best else {
                best = report
                continue
            }
            let (date, bestDate) = (report.effectiveDate ?? .distantPast, current.effectiveDate ?? .distantPast)
            if date > bestDate || (date == bestDate && (report.status.isCompromised || !current.status.isCompromised)) { best = report }
        }
        return best
    }

    /// The most status reports a merged entry keeps before they are condensed.
    package static let maxMergedReports = 64

    /// `reports` reduced to at most three per status MDS3 defines: its undated report, and its
    /// earliest and latest dated ones. The status in effect now (after every date) is the same;
    /// at an earlier time a lifted compromise may show as still in effect, never the reverse.
    /// Entries chained by shared key identifiers each took on all the reports of the one before
    /// (red team, re-check of the seventeenth pass: 800 entries, 1 MB, took 10 s and 763 MB).
    package static func condensed(_ reports: [StatusReport]) -> [StatusReport] {
        var kept: [String: (undated: StatusReport?, earliest: StatusReport?, latest: StatusReport?)] = [:]
        for report in reports where report.status.isKnown {
            var slot = kept[report.status.rawValue] ?? (nil, nil, nil)
            if let date = report.effectiveDate {
                if slot.earliest.flatMap(\.effectiveDate).map({ date < $0 }) ?? true { slot.earliest = report }
                if slot.latest.flatMap(\.effectiveDate).map({ date > $0 }) ?? true { slot.latest = report }
            } else {
                slot.undated = report
            }
            kept[report.status.rawValue] = slot
        }
        var result: [StatusReport] = []
        for status in kept.keys.sorted() {
            guard let slot = kept[status] else { continue }
            for report in [slot.undated, slot.earliest, slot.latest].compactMap({ $0 }) where !result.contains(report) { result.append(report) }
        }
        return result
    }

    /// This entry with the status reports of `others` added (each report once; condensed past
    /// ``maxMergedReports``).
    /// An entry without roots (one kept only for the compromise it reports) keeps the roots of
    /// the last of `others` that has some, so that it does not take trust away before its date.
    func keepingReports(of others: [MetadataEntry]) -> MetadataEntry {
        var reports = statusReports
        var seen = Set(reports)
        for report in others.flatMap(\.statusReports) where seen.insert(report).inserted { reports.append(report) }
        if reports.count > Self.maxMergedReports { reports = Self.condensed(reports) }
        let roots =
            attestationRootCertificates.isEmpty
            ? others.last { !$0.attestationRootCertificates.isEmpty }?.attestationRootCertificates ?? [] : attestationRootCertificates
        return MetadataEntry(
            aaguid: aaguid, attestationCertificateKeyIdentifiers: attestationCertificateKeyIdentifiers, description: description,
            attestationTypes: attestationTypes, attestationRootCertificates: roots, statusReports: reports,
            friendlyNames: friendlyNames, icon: icon)
    }

    /// The name to show for `language` (a BCP 47 tag such as `de-CH`): the friendly name of
    /// that exact tag, else of its language (`de`, or any `de-…`), else of English, else the
    /// ``description``.
    public func displayName(language: String = "en-US") -> String {
        let lower = language.lowercased()
        let primary = lower.split(separator: "-").first.map(String.init) ?? lower
        let names = friendlyNames.map { (tag: $0.key.lowercased(), name: $0.value) }.sorted { $0.tag < $1.tag }
        return names.first { $0.tag == lower }?.name
            ?? names.first { $0.tag == primary || $0.tag.hasPrefix(primary + "-") }?.name
            ?? names.first { $0.tag == "en" || $0.tag.hasPrefix("en-") }?.name
            ?? description
    }

    /// An entry; key identifiers are lowercased.
    ///
    /// - Parameters:
    ///   - aaguid: The authenticator model; nil for a U2F authenticator.
    ///   - attestationCertificateKeyIdentifiers: SHA-1 key identifiers of U2F attestation certificates, in hex.
    ///   - description: The authenticator's name.
    ///   - attestationTypes: The MDS3 attestation type names.
    ///   - rootCertificates: The attestation roots of this authenticator.
    ///   - status: A status that applies at any time (an undated report), if any.
    ///   - statusReports: Dated status reports (after `status`'s, if given).
    ///   - friendlyNames: Names by language tag.
    ///   - icon: A `data:` URL of the icon.
    public init(
        aaguid: AAGUID?, attestationCertificateKeyIdentifiers: [String] = [], description: String,
        attestationTypes: [String] = [], rootCertificates: [Certificate], status: AuthenticatorStatus? = nil,
        statusReports: [StatusReport] = [], friendlyNames: [String: String] = [:], icon: String? = nil
    ) {
        self.init(
            aaguid: aaguid, attestationCertificateKeyIdentifiers: attestationCertificateKeyIdentifiers, description: description,
            attestationTypes: attestationTypes, attestationRootCertificates: rootCertificates.map(\.x509), status: status,
            statusReports: statusReports, friendlyNames: friendlyNames, icon: icon)
    }

    package init(
        aaguid: AAGUID?, attestationCertificateKeyIdentifiers: [String] = [], description: String,
        attestationTypes: [String] = [], attestationRootCertificates: [X509Certificate], status: AuthenticatorStatus? = nil,
        statusReports: [StatusReport] = [], friendlyNames: [String: String] = [:], icon: String? = nil
    ) {
        self.aaguid = aaguid
        self.attestationCertificateKeyIdentifiers = attestationCertificateKeyIdentifiers.map { $0.lowercased() }
        self.description = description
        self.attestationTypes = attestationTypes
        self.attestationRootCertificates = attestationRootCertificates
        self.statusReports = (status.map { [StatusReport(status: $0)] } ?? []) + statusReports
        self.friendlyNames = friendlyNames
        self.icon = icon
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
    /// Compromise reports that name a certificate, by its key identifier, with the entry's name.
    private var compromisedKeys: [String: [(report: StatusReport, description: String)]] = [:]

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

    /// Adds metadata entries. A later entry for the same AAGUID (or key identifier) replaces an
    /// earlier one, but keeps the earlier one's status reports beside its own: the status in
    /// effect is then the latest report of either, whatever the order of loading. An older BLOB,
    /// or a statement without reports, loaded after a BLOB that reports a compromise, cannot
    /// hide it (red team: loaded last, an older FIDO-signed BLOB un-revoked an authenticator);
    /// only a later report can supersede it.
    public mutating func add(_ entries: [MetadataEntry]) {
        for var entry in entries {
            // Only a key compromise follows the key into other models: a report of another status
            // (a user verification bypass, a revocation) is about its own model, and the
            // certificate it names may be the vendor's shared root (re-check of round 28: a
            // model's USER_VERIFICATION_BYPASS naming the shared root refused every sibling).
            for report in entry.statusReports where report.status == .attestationKeyCompromise {
                if let key = report.certificateKeyIdentifier { compromisedKeys[key, default: []].append((report, entry.description)) }
            }
            var earlier = Set<Int>()
            if let aaguid = entry.aaguid, let index = byAAGUID[aaguid] { earlier.insert(index) }
            for id in entry.attestationCertificateKeyIdentifiers { if let index = byKeyIdentifier[id] { earlier.insert(index) } }
            if !earlier.isEmpty { entry = entry.keepingReports(of: earlier.sorted().map { metadata[$0] }) }
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

    /// The metadata entry of an authenticator model, if any: its names (``MetadataEntry/displayName(language:)``,
    /// friendly names, icon) and dated status reports. Nil for the zero AAGUID (U2F authenticators
    /// are found by their attestation certificate during registration).
    public func metadataEntry(for aaguid: AAGUID) -> MetadataEntry? {
        aaguid.isZero ? nil : entry(aaguid: aaguid, attestationCertificate: nil)
    }

    /// The metadata entry for an authenticator: by AAGUID, or for U2F (zero
    /// AAGUID) by the SHA-1 key identifier of its attestation certificate.
    /// A compromise in effect at `time` for the key of `certificate`, whatever authenticator the
    /// attestation claims to be: the status of the entry that lists the key's identifier (U2F
    /// key identifiers), or a compromise report that names a certificate with this key. Red team,
    /// round 28: a leaked attestation key reported compromised under one model was trusted when
    /// the registration claimed a sibling model whose entry lists the same root; only the
    /// claimed entry's status was read.
    package func compromise(ofKeyOf certificate: X509Certificate, at time: Date) -> (report: StatusReport, authenticator: String)? {
        guard let id = certificate.publicKeyIdentifier else { return nil }
        if let index = byKeyIdentifier[id], let report = metadata[index].statusReport(at: time), report.status.isCompromised {
            return (report, metadata[index].displayName())
        }
        for named in compromisedKeys[id] ?? [] where (named.report.effectiveDate ?? .distantPast) <= time {
            return (named.report, named.description)
        }
        return nil
    }

    package func entry(aaguid: AAGUID, attestationCertificate: X509Certificate?) -> MetadataEntry? {
        if !aaguid.isZero { return byAAGUID[aaguid].map { metadata[$0] } }
        guard let cert = attestationCertificate, let id = cert.publicKeyIdentifier else { return nil }
        return byKeyIdentifier[id].map { metadata[$0] }
    }
}
