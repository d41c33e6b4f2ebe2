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
