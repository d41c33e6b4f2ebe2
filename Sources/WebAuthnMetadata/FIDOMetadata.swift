public import Foundation
public import WebAuthnCore
package import _WebAuthnEncoding
package import _WebAuthnCrypto

/// FIDO Metadata Service (MDS3) trust data: a BLOB JWT as published, its
/// decoded payload, one metadata statement, or a folder of statements and payloads.
public struct FIDOMetadata: Sendable {
    /// The BLOB's serial number (`no`); nil for statements.
    public let serial: Int?
    /// The BLOB's `nextUpdate`; nil for statements.
    public let nextUpdate: Date?
    /// The entries read, to pass to `TrustAnchors.add(_:)`.
    public let entries: [MetadataEntry]
    /// Entries that could not be read (a bad root certificate), skipped.
    public let skipped: Int

    /// Options for loading a BLOB JWT.
    public struct BLOBOptions: Sendable {
        /// The roots the BLOB's x5c must chain to. Default: ``fidoMDSRoots`` (GlobalSign Root R46
        /// and GlobalSign Root CA - R3). Setting them sets ``signerName`` to its default for them.
        package var roots: [X509Certificate] {
            didSet { signerName = Self.defaultSignerName(for: roots) }
        }
        package var crls: [CertificateRevocationList]
        /// Refuse a BLOB past its nextUpdate. Default true (MDS3: fetch a newer one).
        public var refuseStale: Bool
        /// Refuse a BLOB whose `no` is below this (one already loaded).
        public var minimumSerial: Int
        /// The host name the BLOB signing certificate must be issued to (a subjectAltName dNSName
        /// equal to it: no wildcard, not the common name), or nil for any. Default: `mds.fidoalliance.org` when the roots
        /// include a FIDO MDS root, nil for roots of your own. The FIDO MDS roots are public TLS
        /// roots: without this, any certificate GlobalSign issued (a TLS certificate for any site)
        /// could sign a BLOB and make its own authenticators trusted (red team, twelfth pass).
        public var signerName: String?

        /// GlobalSign Root CA - R3, the root of the FIDO MDS BLOB signing chain until 2026-08.
        public static let fidoMDSRoot = try! Certificate(pem: KnownRoots.globalSignRootR3)
        /// GlobalSign Root R46, the root of the FIDO MDS BLOB signing chain since 2026-08-21.
        public static let fidoMDSRootR46 = try! Certificate(pem: KnownRoots.globalSignRootR46)
        /// The FIDO MDS roots: R46 (today's chains) and R3 (earlier BLOBs and cross-signed chains).
        public static let fidoMDSRoots = [fidoMDSRootR46, fidoMDSRoot]
        /// The host name of the FIDO MDS BLOB signing certificate.
        public static let fidoMDSSignerName = "mds.fidoalliance.org"

        /// - Parameters:
        ///   - roots: the roots the BLOB's x5c must chain to; nil: ``fidoMDSRoots``.
        ///   - revocationLists: CRLs checked on the signing chain.
        public init(roots: [Certificate]? = nil, revocationLists: [RevocationList] = [], refuseStale: Bool = true, minimumSerial: Int = 0) {
            self.init(x509Roots: roots?.map(\.x509), crls: revocationLists.map(\.crl), refuseStale: refuseStale, minimumSerial: minimumSerial)
        }

        package init(
            x509Roots roots: [X509Certificate]?,
            crls: [CertificateRevocationList] = [], refuseStale: Bool = true, minimumSerial: Int = 0
        ) {
            self.roots = roots ?? Self.fidoMDSRoots.map(\.x509)
            self.crls = crls
            self.refuseStale = refuseStale
            self.minimumSerial = minimumSerial
            signerName = Self.defaultSignerName(for: self.roots)
        }

        /// `mds.fidoalliance.org` when `roots` include a FIDO MDS root, else nil. A root is one of
        /// them when it has its subject and its key, whatever else its bytes say (a cross-signed
        /// or re-encoded copy of R46 is R46).
        static func defaultSignerName(for roots: [X509Certificate]) -> String? {
            roots.contains { identity($0).map(fidoMDSIdentities.contains) ?? false } ? fidoMDSSignerName : nil
        }

        /// A root's subject and key, which a re-encoded or cross-signed copy shares.
        private static func identity(_ c: X509Certificate) -> String? {
            guard let key = try? c.publicKey().subjectPublicKeyInfo else { return nil }
            return c.subjectSummary + "|" + Bytes.hex(key)
        }

        /// The FIDO MDS roots' identities, computed once.
        private static let fidoMDSIdentities = Set(fidoMDSRoots.compactMap { identity($0.x509) })
    }

    /// The largest metadata file read (production BLOBs are a few MiB).
    public static let maxSize = 32 << 20

    /// Loads a BLOB JWT file, a decoded BLOB payload (JSON with `entries`), a
    /// metadata statement (JSON), or a folder of `.json` files, each a statement
    /// or a decoded BLOB payload.
    public static func load(path: String, at time: Date, options: BLOBOptions = BLOBOptions()) throws(WebAuthnError) -> FIDOMetadata {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw WebAuthnError(.metadataInvalid, "no metadata at \(path)")
        }
        if isDirectory.boolValue {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
            var entries: [MetadataEntry] = []
            var payloads: [FIDOMetadata] = []
            var skipped = 0
            for name in names {
                let json = try parseJSON(try read((path as NSString).appendingPathComponent(name)))
                if json["entries"] != nil {
                    // A decoded BLOB payload among the statements contributes its entries, with their status reports.
                    // A broken payload fails the load rather than being skipped: its status reports
                    // (REVOKED, ...) must not vanish silently.
                    let payload = try payload(json)
                    payloads.append(payload)
                    skipped += payload.skipped
                } else if let entry = try? statementEntry(json, status: nil) {
                    entries.append(entry)
                } else {
                    skipped += 1
                }
            }
            // Payloads after the statements, lowest `no` first, as ``TrustAnchors/add(_:)-([FIDOMetadata])``
            // orders BLOBs: the newest supplies the roots, whatever the file names (re-check of
            // round 28: by name, an older payload sorting last restored roots a newer one removed).
            for i in payloads.indices.sorted(by: { Self.newer(payloads, $1, than: $0) }) { entries += payloads[i].entries }
            return FIDOMetadata(serial: nil, nextUpdate: nil, entries: entries, skipped: skipped)
        }
        let bytes = try read(path)
        let text = bytes.prefix(16).filter { $0 > 0x20 }
        if text.starts(with: Array("ey".utf8)) { return try blob(jwt: bytes, at: time, options: options) }
        let json = try parseJSON(bytes)
        if json["entries"] != nil { return try payload(json) }
        return FIDOMetadata(serial: nil, nextUpdate: nil, entries: [try statementEntry(json, status: nil)], skipped: 0)
    }

    /// Reads a BLOB JWT file (at most `maxSize` bytes) and verifies it as `blob(jwt:at:options:)` does;
    /// unlike `load(path:…)`, it never accepts anything but a signed BLOB.
    public static func blob(path: String, at time: Date, options: BLOBOptions = BLOBOptions()) throws(WebAuthnError) -> FIDOMetadata {
        try blob(jwt: try read(path), at: time, options: options)
    }

    /// Verifies and reads a BLOB JWT: its x5c chain to `options.roots` at
    /// `time`, its signing certificate's name (`options.signerName`), its signature, its
    /// `nextUpdate` and `no`.
    public static func blob(jwt bytes: [UInt8], at time: Date, options: BLOBOptions = BLOBOptions()) throws(WebAuthnError) -> FIDOMetadata {
        // By index: the lazy drop-reverse-drop-reverse took 7 s for a forged 32 MiB file in a
        // debug build before anything was checked (re-check of round 28).
        let start = bytes.firstIndex { $0 > 0x20 } ?? bytes.endIndex
        let end = bytes.lastIndex { $0 > 0x20 }.map { $0 + 1 } ?? start
        let trimmed = Array(bytes[start..<max(start, end)])
        let jws: JWS
        // The payload is parsed only once the signature verifies (red team, round 28).
        do { jws = try JWS(compact: trimmed, maxSize: maxSize, readPayload: false) } catch {
            throw WebAuthnError(.metadataInvalid, "not a metadata BLOB JWT: \(error.message)")
        }
        // RFC 7515 §4.1.11: a header parameter named critical must be understood; none is here.
        guard jws.header["crit"] == nil else { throw WebAuthnError(.metadataInvalid, "the BLOB header has crit, which is refused") }
        guard let x5c = jws.header["x5c"]?.arrayValue, !x5c.isEmpty, x5c.count <= CertificateChain.maxDepth else {
            throw WebAuthnError(.metadataInvalid, "the BLOB header needs x5c with 1 to \(CertificateChain.maxDepth) certificates")
        }
        var chain: [X509Certificate] = []
        for item in x5c {
            guard let text = item.stringValue, let der = Data(base64Encoded: text) else {
                throw WebAuthnError(.metadataInvalid, "a BLOB x5c entry is not base64 DER")
            }
            chain.append(try X509Certificate(der: [UInt8](der)))
        }
        switch CertificateChain.validate(chain, anchors: options.roots, crls: options.crls, at: time, leafRole: "the BLOB signing certificate") {
        case .trusted: break
        case .untrusted(let error): throw WebAuthnError(.metadataUntrusted, "the BLOB signing chain: \(error.message)")
        }
        if let name = options.signerName, !chain[0].hasExactDNSName(name) {
            throw WebAuthnError(
                .metadataUntrusted, "the BLOB signing certificate (\(chain[0].subjectSummary.prefix(128))) is not issued to \(name)")
        }
        do { try jws.verifySignature(with: chain[0].publicKey()) } catch {
            throw WebAuthnError(.metadataUntrusted, "the BLOB signature: \(error.message)")
        }
        let json: JSONValue
        do { json = try jws.readPayload() } catch { throw WebAuthnError(.metadataInvalid, "the BLOB payload: \(error.message)") }
        let metadata = try payload(json)
        guard let serial = metadata.serial, metadata.nextUpdate != nil else {
            throw WebAuthnError(.metadataInvalid, "the BLOB payload needs no and nextUpdate (MDS3 §3.1.6)")
        }
        if serial < options.minimumSerial {
            throw WebAuthnError(.metadataStale, "the BLOB is no \(serial); no \(options.minimumSerial) or later was loaded before")
        }
        if options.refuseStale, let next = metadata.nextUpdate, time > next.addingTimeInterval(86_400) {
            throw WebAuthnError(.metadataStale, "the BLOB's nextUpdate \(ISO8601DateFormatter().string(from: next)) has passed; fetch a newer BLOB")
        }
        return metadata
    }

    /// Reads a decoded BLOB payload (`no`, `nextUpdate`, `entries`).
    package static func payload(_ json: JSONValue) throws(WebAuthnError) -> FIDOMetadata {
        guard let list = json["entries"]?.arrayValue else { throw WebAuthnError(.metadataInvalid, "the BLOB payload has no entries") }
        var entries: [MetadataEntry] = []
        var skipped = 0
        var named: [String: Int] = [:]
        for item in list {
            let (reports, reportsReadable) = statusReports(item["statusReports"])
            // An entry without a statement (MDS3 allows one) is skipped as one that cannot be
            // read, keeping a compromise it reports (red team, sixteenth pass: dropped whole).
            var merged = item["metadataStatement"] ?? .object(JSONObject())
            if case .object(var object) = merged {
                if object["aaguid"] == nil, let aaguid = item["aaguid"] { object["aaguid"] = aaguid }
                if object["attestationCertificateKeyIdentifiers"] == nil, let ids = item["attestationCertificateKeyIdentifiers"] {
                    object["attestationCertificateKeyIdentifiers"] = ids
                }
                merged = .object(object)
            }
            let identities = entryIdentities(item, statement: merged)
            for name in identities.aaguids.map(\.description) + identities.keyIdentifiers {
                let count = named[name, default: 0] + 1
                named[name] = count
                guard count <= maxEntriesPerAuthenticator else {
                    throw WebAuthnError(.metadataInvalid, "the BLOB payload lists one authenticator in more than \(maxEntriesPerAuthenticator) entries")
                }
            }
            if item["metadataStatement"] != nil, reportsReadable, identities.agree, let entry = try? statementEntry(merged, status: nil, reports: reports) {
                entries.append(entry)
            } else {
                skipped += 1
                // A statement that cannot be read (a root that is not a certificate) anchors no
                // trust, but a compromise it reports still counts: skipped whole, it took the
                // revocation with it (red team, sixteenth pass). So do an entry whose status
                // reports cannot all be read, and one whose own AAGUID or key identifiers differ
                // from its statement's (the compromise then applies to both).
                if reports.contains(where: \.status.isCompromised) {
                    for aaguid in identities.aaguids {
                        entries.append(
                            MetadataEntry(
                                aaguid: aaguid, description: merged["description"]?.stringValue ?? "(no description)",
                                attestationRootCertificates: [], statusReports: reports))
                    }
                    if !identities.keyIdentifiers.isEmpty {
                        entries.append(
                            MetadataEntry(
                                aaguid: nil, attestationCertificateKeyIdentifiers: identities.keyIdentifiers,
                                description: merged["description"]?.stringValue ?? "(no description)", attestationRootCertificates: [],
                                statusReports: reports))
                    }
                }
            }
        }
        // `no` and `nextUpdate`, when given, must be what MDS3 says (a whole number, a day): a
        // malformed one was read as absent, which turned off the rollback and staleness checks
        // (red team, sixteenth pass: `"2099-02-30"`, a float, a string, 10^30).
        var serial: Int?
        if let value = json["no"] {
            guard let number = value.intValue, number >= 0 else { throw WebAuthnError(.metadataInvalid, "the BLOB payload's no is not a whole number") }
            serial = number
        }
        var nextUpdate: Date?
        if let value = json["nextUpdate"] {
            guard let text = value.stringValue, let day = day(text), text.count == 10 else {
                throw WebAuthnError(.metadataInvalid, "the BLOB payload's nextUpdate is not a day (YYYY-MM-DD)")
            }
            nextUpdate = day
        }
        return FIDOMetadata(serial: serial, nextUpdate: nextUpdate, entries: entries, skipped: skipped)
    }

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

    package static func read(_ path: String) throws(WebAuthnError) -> [UInt8] {
        guard let data = AtomicFile.read(path, limit: maxSize) else {
            throw WebAuthnError(.metadataInvalid, "cannot read \(path) (or it is larger than \(maxSize) bytes)")
        }
        return data
    }

    package static func parseJSON(_ bytes: [UInt8]) throws(WebAuthnError) -> JSONValue {
        do { return try JSONValue.parse(bytes, limits: JSONLimits(maxBytes: maxSize, maxDepth: 32)) } catch {
            throw WebAuthnError(.metadataInvalid, "metadata is not JSON: \(error.message)")
        }
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
