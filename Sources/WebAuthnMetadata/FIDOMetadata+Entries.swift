package import Foundation
public import WebAuthnCore
package import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The entries of a payload: their status reports, identities, statements and names; and the
/// order of several BLOBs.
extension FIDOMetadata {
    /// Whether `blobs[i]` is newer than `blobs[j]`: a higher `no` (none is lowest), then a later
    /// `nextUpdate`, then the later place in `blobs`.
    static func newer(_ blobs: [FIDOMetadata], _ i: Int, than j: Int) -> Bool {
        func order(_ k: Int) -> (Int, Double, Int) { (blobs[k].serial ?? -1, blobs[k].nextUpdate?.timeIntervalSince1970 ?? -.infinity, k) }
        return order(j) < order(i)
    }

    /// The most status reports read per entry (FIDO's entries hold a handful).
    static let maxStatusReports = 64

    /// An entry's `statusReports`: each with a `status` string, dated by its `effectiveDate`
    /// when that is a day (`YYYY-MM-DD`, optionally followed by a time, which is ignored);
    /// a report without a readable date applies at any time (a compromise is never lost to a
    /// malformed date). More than ``maxStatusReports`` make the entry unreadable (below).
    ///
    /// `readable` is false when the field is there but is not an array, or one of its reports
    /// has no status string: the entry's status is then unknown, and it anchors no trust (red
    /// team, sixteenth pass: such an entry was read as one without reports, so as not revoked).
    static func statusReports(_ json: JSONValue?) -> (reports: [StatusReport], readable: Bool) {
        guard let json else { return ([], true) }
        guard let list = json.arrayValue else { return ([], false) }
        var readable = list.count <= maxStatusReports
        var reports: [StatusReport] = []
        for item in list {
            guard let status = item["status"]?.stringValue, !status.isEmpty, status.utf8.count <= 64 else {
                readable = false
                continue
            }
            reports.append(
                StatusReport(
                    status: AuthenticatorStatus(rawValue: status), effectiveDate: item["effectiveDate"]?.stringValue.flatMap(day),
                    certificateKeyIdentifier: reportCertificateKeyIdentifier(item["certificate"])))
        }
        guard !readable else { return (reports, true) }
        // Unreadable, the entry anchors no trust and only its compromises are kept, condensed as
        // merged reports are: from the earliest on, the authenticator counts as compromised.
        // Reports past the 64th were dropped, a REVOKED among them (red team, seventeenth pass:
        // 64 certifications, then REVOKED, read as certified). A compromise that names a
        // certificate is kept whole: it is looked up by that certificate's key, whatever entry a
        // registration claims (re-check of round 28: condensed to three, the 35th of 70 leaked
        // keys named was trusted).
        let compromises = reports.filter(\.status.isCompromised)
        let condensed = MetadataEntry.condensed(compromises)
        let naming = compromises.filter { $0.certificateKeyIdentifier != nil && !condensed.contains($0) }
        return (condensed + naming, false)
    }

    /// The key identifier of a status report's `certificate` (base64 DER, at most 16 KiB); nil
    /// when there is none or it cannot be read (the report still applies to its entry).
    static func reportCertificateKeyIdentifier(_ json: JSONValue?) -> String? {
        guard let text = json?.stringValue, text.utf8.count <= 16 << 10, let der = Data(base64Encoded: text) else { return nil }
        return (try? X509Certificate(der: [UInt8](der)))?.publicKeyIdentifier
    }

    /// The AAGUIDs and U2F key identifiers a BLOB entry names, in the entry and in its statement,
    /// and whether they agree. MDS3 repeats them in both places; an entry whose two differ is
    /// not trusted (red team, sixteenth pass: the statement's were used and the entry's ignored),
    /// nor is one where either is there but cannot be read (its re-check: a statement `aaguid` of
    /// `null` or `"not-a-uuid"` was taken as agreeing, and the entry's revocation was lost).
    static func entryIdentities(_ item: JSONValue, statement: JSONValue) -> (aaguids: [AAGUID], keyIdentifiers: [String], agree: Bool) {
        var readable = true
        var aaguids = Set<AAGUID>()
        for value in [item["aaguid"], statement["aaguid"]] {
            guard let value else { continue }
            if let aaguid = value.stringValue.flatMap(AAGUID.init) { aaguids.insert(aaguid) } else { readable = false }
        }
        var keySets: [Set<String>] = []
        for value in [item["attestationCertificateKeyIdentifiers"], statement["attestationCertificateKeyIdentifiers"]] {
            guard let value else { continue }
            // A lone string is unreadable too, but names the identity a compromise applies to.
            let items = value.arrayValue ?? (value.stringValue != nil ? [value] : [])
            let ids = items.compactMap { $0.stringValue?.lowercased() }
            if value.arrayValue == nil || ids.count != items.count { readable = false }
            keySets.append(Set(ids))
        }
        let agree = readable && aaguids.count <= 1 && Set(keySets).count <= 1
        let keys = keySets.reduce(into: Set<String>()) { $0.formUnion($1) }.sorted()
        return (aaguids.sorted { $0.description < $1.description }, keys, agree)
    }

    /// The most entries of one payload that may name one authenticator (an AAGUID or a key
    /// identifier). MDS3 lists each once; merging N entries for one costs in N² (red team,
    /// seventeenth pass: 400 entries of one AAGUID, 1.6 MB, took 103 s to load).
    package static let maxEntriesPerAuthenticator = 8

    /// Midnight UTC of a `YYYY-MM-DD` day (the proleptic Gregorian calendar), or nil.
    package static func day(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 10 || (bytes.count > 10 && bytes[10] == UInt8(ascii: "T")), bytes.count <= 40,
            bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let dayOfMonth = number(8..<10), (1...12).contains(month) else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...lengths[month - 1]).contains(dayOfMonth) else { return nil }
        // Days since 1970-01-01 (H. Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + dayOfMonth - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return Date(timeIntervalSince1970: TimeInterval(era * 146_097 + doe - 719_468) * 86_400)
    }

    /// The most attestation roots one statement may list (the most in FIDO's BLOB 85 is 39).
    package static let maxRootsPerEntry = 64

    /// The largest icon kept (a `data:` URL; FIDO's are a few KiB).
    static let maxIconSize = 128 * 1024

    /// One metadata statement (MDS3 §4) as an entry, with an undated `status` if given and the entry's dated `reports`.
    package static func statementEntry(_ json: JSONValue, status: AuthenticatorStatus?, reports: [StatusReport] = []) throws(WebAuthnError)
        -> MetadataEntry
    {
        guard json.objectValue != nil else { throw WebAuthnError(.metadataInvalid, "a metadata statement is not a JSON object") }
        var roots: [X509Certificate] = []
        let listed = json["attestationRootCertificates"]?.arrayValue ?? []
        // Each registration that claims the entry validates against all of them (red team, round
        // 28: 30,000 roots cost 27 s per registration, quadratic in OpenSSL's store).
        guard listed.count <= maxRootsPerEntry else {
            throw WebAuthnError(.metadataInvalid, "a metadata statement lists \(listed.count) attestation roots; at most \(maxRootsPerEntry) are read")
        }
        for item in listed {
            guard let text = item.stringValue, let der = Data(base64Encoded: text) else {
                throw WebAuthnError(.metadataInvalid, "an attestationRootCertificates entry is not base64 DER")
            }
            roots.append(try X509Certificate(der: [UInt8](der)))
        }
        let aaguid = json["aaguid"]?.stringValue.flatMap(AAGUID.init)
        let ids = json["attestationCertificateKeyIdentifiers"]?.arrayValue?.compactMap(\.stringValue) ?? []
        guard aaguid != nil || !ids.isEmpty || json["aaid"] != nil else {
            throw WebAuthnError(.metadataInvalid, "a metadata statement names no aaguid, aaid or attestationCertificateKeyIdentifiers")
        }
        return MetadataEntry(
            aaguid: aaguid, attestationCertificateKeyIdentifiers: ids,
            description: json["description"]?.stringValue ?? "(no description)",
            attestationTypes: json["attestationTypes"]?.arrayValue?.compactMap(\.stringValue) ?? [],
            attestationRootCertificates: roots, status: status, statusReports: reports, friendlyNames: friendlyNames(json["friendlyNames"]),
            icon: json["icon"]?.stringValue.flatMap { $0.hasPrefix("data:image/") && $0.utf8.count <= maxIconSize ? $0 : nil })
    }

    /// `friendlyNames`: language tag to name, at most 64 of each at most 256 bytes; others are ignored.
    static func friendlyNames(_ json: JSONValue?) -> [String: String] {
        var names: [String: String] = [:]
        for (tag, value) in json?.objectValue?.members.prefix(64) ?? [] {
            guard let name = value.stringValue, !tag.isEmpty, tag.utf8.count <= 35, !name.isEmpty, name.utf8.count <= 256 else { continue }
            names[tag] = name
        }
        return names
    }
}

extension TrustAnchors {
    /// Adds the entries of several verified BLOBs (or payloads), lowest `no` first, whatever
    /// their order here (one without a `no` before any with one): the newest BLOB then supplies
    /// each authenticator's attestation roots, and status reports are merged from all of them
    /// (``add(_:)-([MetadataEntry])``). Red team, round 28: the BLOB added last supplied the
    /// roots, so an older FIDO-signed BLOB named after a newer one (`…no9.jwt` sorts after
    /// `…no85.jwt`) restored roots FIDO had removed.
    /// Of two with the same `no` (FIDO has published two `no: 10`), the later `nextUpdate` is newer.
    public mutating func add(_ blobs: [FIDOMetadata]) {
        let ordered = blobs.indices.sorted { FIDOMetadata.newer(blobs, $1, than: $0) }
        for i in ordered { add(blobs[i].entries) }
    }
}
