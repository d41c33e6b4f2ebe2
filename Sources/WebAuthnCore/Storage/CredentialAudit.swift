public import Foundation
public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Why a stored credential is flagged: FIDO metadata reports its authenticator
/// compromised (`REVOKED`, `ATTESTATION_KEY_COMPROMISE`, `USER_VERIFICATION_BYPASS`,
/// `USER_KEY_REMOTE_COMPROMISE`, `USER_KEY_PHYSICAL_COMPROMISE`).
public struct CredentialFlag: Sendable, Equatable {
    /// The status in effect.
    public let status: AuthenticatorStatus
    /// The authenticator as the metadata names it.
    public let authenticator: String
    /// When the status took effect (its report's `effectiveDate`), nil when the report gives none.
    public let since: Date?
    /// Whether the credential's attestation proved its model (a certificate chain), or only claimed
    /// it (an AAGUID in `none` or self attestation, which anyone can write).
    public let attested: Bool

    /// The longest authenticator name a flag keeps, in Unicode scalars: a flag is stored as JSON
    /// read back within 4 KiB, and a longer name (a metadata description has no limit) made the
    /// flag read back as unreadable, which an audit then replaced and cleared (red team, re-check
    /// of the seventeenth pass: a REVOKED flag lifted that way).
    public static let maxAuthenticatorLength = 200

    /// A flag; each parameter sets the property of the same name (`authenticator` cut to
    /// ``maxAuthenticatorLength`` scalars).
    public init(status: AuthenticatorStatus, authenticator: String, since: Date?, attested: Bool) {
        self.status = status
        var name = String.UnicodeScalarView()
        name.append(contentsOf: authenticator.unicodeScalars.prefix(Self.maxAuthenticatorLength))
        self.authenticator = String(name)
        self.since = since
        self.attested = attested
    }

    /// The flag of a stored credential whose flag cannot be read (a damaged value): the credential
    /// stays flagged, with no date, until an audit flags it anew or the value is cleared in the store.
    public static let unreadable = CredentialFlag(
        status: AuthenticatorStatus(rawValue: "UNREADABLE_FLAG"), authenticator: "an authenticator (the stored flag cannot be read)", since: nil,
        attested: false)

    /// One sentence for logs, reports and the account page.
    public var reason: String {
        let day = since.map { " since " + ISO8601DateFormatter.day.string(from: $0) } ?? ""
        return "FIDO metadata reports \(authenticator) as \(status)\(day)" + (attested ? "" : " (the model is claimed by the credential, not attested)")
    }

    package var json: JSONValue {
        var o: JSONObject = ["status": .string(status.rawValue), "authenticator": .string(authenticator), "attested": .bool(attested)]
        if let since { o["since"] = .number(since.timeIntervalSince1970) }
        return .object(o)
    }

    package init?(json: JSONValue) {
        guard let status = json["status"]?.stringValue, let authenticator = json["authenticator"]?.stringValue else { return nil }
        self.init(
            status: AuthenticatorStatus(rawValue: status), authenticator: authenticator,
            since: json["since"]?.numberValue.map(Date.init(timeIntervalSince1970:)), attested: json["attested"]?.boolValue ?? false)
    }
}

extension ISO8601DateFormatter {
    /// `2026-11-24`.
    static var day: ISO8601DateFormatter {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withFullDate]
        return f
    }
}

/// A store whose credentials can be scanned in batches and flagged: what
/// ``CredentialAudit`` needs. The SQLite, PostgreSQL and in-memory stores are.
public protocol CredentialAuditing: CredentialStore {
    /// Up to `limit` credentials whose IDs sort after `cursor` (byte order; nil: from the start), in that order.
    func credentials(after cursor: [UInt8]?, limit: Int) async throws -> [CredentialRecord]
    /// What ``credentials(after:limit:)`` returns, with each row that cannot be read as a
    /// credential (a key that no longer decodes, a damaged value) given by its ID instead of
    /// failing the batch. The default reads ``credentials(after:limit:)``, where one such row
    /// fails the batch; the SQLite and PostgreSQL stores implement it.
    func auditRows(after cursor: [UInt8]?, limit: Int) async throws -> [AuditRow]
    /// Sets (or clears, with nil) the flag of credential `id` and nothing else; returns whether it exists.
    func setFlag(_ flag: CredentialFlag?, id: [UInt8]) async throws -> Bool
}

/// One stored credential as an audit reads it.
public enum AuditRow: Sendable {
    /// A credential read whole.
    case record(CredentialRecord)
    /// A row that could not be read as a credential: its ID, and why.
    case unreadable(id: [UInt8], reason: String)

    /// The row's credential ID.
    public var id: [UInt8] {
        switch self {
        case .record(let record): record.id
        case .unreadable(let id, _): id
        }
    }
}

extension CredentialAuditing {
    /// ``credentials(after:limit:)``, each as a ``AuditRow/record(_:)``.
    public func auditRows(after cursor: [UInt8]?, limit: Int) async throws -> [AuditRow] {
        try await credentials(after: cursor, limit: limit).map(AuditRow.record)
    }
}

/// The re-audit of stored credentials against FIDO metadata: after each metadata
/// change, every credential's authenticator is looked up again (by AAGUID, or for a
/// U2F credential by its attestation certificate's key identifier) and its status in
/// effect at the engine's time decides the flag. A flag is cleared only by a report that lifts
/// it: in effect, not a compromise, and dated after the flag's own date. A flagged credential
/// whose authenticator the metadata does not list (a BLOB that failed to load, an entry
/// dropped), lists with no report in effect, or lists with an older report (an older BLOB, a
/// statement without reports) stays flagged, and so does a flag from an undated compromise.
/// The store is read in batches, so memory does not grow with it.
public enum CredentialAudit {
    /// What one audit found.
    public struct Report: Sendable {
        /// One credential whose flag changed, or that stays flagged.
        public struct Entry: Sendable {
            /// The credential ID.
            public let credentialId: [UInt8]
            /// The owner's user handle.
            public let userHandle: [UInt8]
            /// The credential's AAGUID.
            public let aaguid: AAGUID
            /// The flag now (nil: cleared).
            public let flag: CredentialFlag?
        }
        /// Credentials read.
        public internal(set) var scanned = 0
        /// Credentials flagged by this audit (not flagged before, or flagged for another status).
        public internal(set) var flagged: [Entry] = []
        /// Credentials whose flag this audit cleared.
        public internal(set) var cleared: [Entry] = []
        /// Credentials flagged before and still flagged for the same status.
        public internal(set) var stillFlagged = 0
        /// Rows that could not be read as credentials, by ID, with the reason: skipped, so that
        /// one damaged row does not stop the audit of the others (red team, sixteenth pass: a
        /// stored key that no longer decoded failed every audit, so no credential was flagged).
        public internal(set) var unreadable: [(credentialId: [UInt8], reason: String)] = []
        /// Credentials flagged before for which the metadata gives no report that lifts the flag
        /// (not listed, no report in effect, none dated after the flag): kept flagged, since
        /// nothing says the compromise is over (red team, sixteenth pass: a BLOB that failed to
        /// verify, an older BLOB or a statement without reports cleared every flag).
        public internal(set) var keptFlagged = 0
        /// When the audit judged (the metadata time).
        public let at: Date

        /// The report as JSON: counts, and each change with the credential ID, a hash of its
        /// owner's handle (not the handle itself), the AAGUID and the reason.
        public var json: String {
            func entry(_ e: Entry) -> JSONValue {
                var o: JSONObject = [
                    "credentialId": .string(Base64URL.encode(e.credentialId)),
                    "account": .string(Base64URL.encode(Array(Digest.sha256(e.userHandle).prefix(12)))),
                    "aaguid": .string(e.aaguid.description),
                ]
                if let flag = e.flag {
                    o["status"] = .string(flag.status.rawValue)
                    o["reason"] = .string(flag.reason)
                }
                return .object(o)
            }
            let o: JSONObject = [
                "at": .string(ISO8601DateFormatter().string(from: at)), "scanned": .number(Double(scanned)),
                "stillFlagged": .number(Double(stillFlagged)), "keptFlagged": .number(Double(keptFlagged)),
                "flagged": .array(flagged.map(entry)), "cleared": .array(cleared.map(entry)),
                "unreadable": .array(
                    unreadable.map { .object(["credentialId": .string(Base64URL.encode($0.credentialId)), "reason": .string($0.reason)]) }),
            ]
            return JSONValue.object(o).serialized()
        }
    }

    /// The flag `record` deserves under `anchors` at `time`, if any.
    public static func flag(for record: CredentialRecord, anchors: TrustAnchors, at time: Date) -> CredentialFlag? {
        judge(record, anchors: anchors, at: time).flag
    }

    /// The flag `record` deserves under `anchors` at `time`, and the report in effect (nil when
    /// the authenticator is not listed or no report of its applies yet).
    static func judge(_ record: CredentialRecord, anchors: TrustAnchors, at time: Date) -> (report: StatusReport?, flag: CredentialFlag?) {
        let chain = record.attestationChain.compactMap { try? X509Certificate(der: $0) }
        let claimed = anchors.entry(aaguid: record.aaguid, attestationCertificate: chain.first)
        let claimedReport = claimed?.statusReport(at: time)
        // A compromise FIDO reports for a key of the stored chain, under whichever entry names it
        // (red team, round 28: the registration could claim a sibling model's AAGUID).
        if claimedReport?.status.isCompromised != true, let found = chain.lazy.compactMap({ anchors.compromise(ofKeyOf: $0, at: time) }).first {
            return (
                found.report, CredentialFlag(status: found.report.status, authenticator: found.authenticator, since: found.report.effectiveDate, attested: true)
            )
        }
        guard let entry = claimed, let report = claimedReport else { return (nil, nil) }
        guard report.status.isCompromised else { return (report, nil) }
        let flag = CredentialFlag(
            status: report.status, authenticator: entry.displayName(), since: report.effectiveDate, attested: !record.attestationChain.isEmpty)
        return (report, flag)
    }

    /// Whether `report` lifts `flag`: a report not of a compromise, dated after the flag's date
    /// (an undated flag is never lifted by a report, an undated report lifts nothing, and a
    /// `REVOKED` flag is lifted by nothing: clear it in the store if it was set in error).
    static func lifts(_ report: StatusReport?, _ flag: CredentialFlag) -> Bool {
        // A REVOKED flag is final, as a REVOKED report is (red team, seventeenth pass: metadata
        // listing only a later certification, a newer BLOB without the report, cleared it).
        guard let report, !report.status.isCompromised, flag.status != .revoked, let date = report.effectiveDate, let since = flag.since else {
            return false
        }
        return date > since
    }

    /// Audits every credential of `store` against `anchors` at `time`, `batchSize` at a time;
    /// writes the changed flags unless `write` is false (a dry run).
    ///
    /// - Throws: `storage_failure` when the store fails (flags written before stay written:
    ///   each is right on its own, and the next audit finishes the work).
    public static func run(
        store: any CredentialAuditing, anchors: TrustAnchors, at time: Date, batchSize: Int = 500, write: Bool = true
    ) async throws(WebAuthnError) -> Report {
        var report = Report(at: time)
        var cursor: [UInt8]?
        let limit = max(1, min(batchSize, 10_000))
        while true {
            let batch: [AuditRow]
            do { batch = try await store.auditRows(after: cursor, limit: limit) } catch {
                throw (error as? WebAuthnError) ?? WebAuthnError(.storageFailure, "the store failed: \(error)")
            }
            for row in batch {
                report.scanned += 1
                guard case .record(let record) = row else {
                    if case .unreadable(let id, let reason) = row { report.unreadable.append((id, reason)) }
                    continue
                }
                let (inEffect, now) = judge(record, anchors: anchors, at: time)
                let entry = Report.Entry(credentialId: record.id, userHandle: record.userHandle, aaguid: record.aaguid, flag: now)
                switch (record.flag, now) {
                case (nil, nil): continue
                case (let before?, nil) where !lifts(inEffect, before): report.keptFlagged += 1; continue
                case (let before?, let after?) where before.status == after.status: report.stillFlagged += 1; continue
                // Nor is REVOKED replaced by another compromise, which a later report could lift.
                case (let before?, .some) where before.status == .revoked: report.keptFlagged += 1; continue
                case (_, nil): report.cleared.append(entry)
                case (_, .some): report.flagged.append(entry)
                }
                if write {
                    do { _ = try await store.setFlag(now, id: record.id) } catch {
                        throw (error as? WebAuthnError) ?? WebAuthnError(.storageFailure, "the store failed: \(error)")
                    }
                }
            }
            guard batch.count == limit, let last = batch.last else { break }
            cursor = last.id
        }
        return report
    }
}
