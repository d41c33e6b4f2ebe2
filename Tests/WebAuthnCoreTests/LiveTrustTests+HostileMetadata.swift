import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnTesting
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Metadata written against the trust it carries: revocation lifted or lost, entries that cost in
/// their square, flags that do not read back (red team, sixteenth and seventeenth passes).
extension LiveTrustTests {
    @Test("REVOKED is final: no later report lifts it, from the same source or another")
    func revocationIsFinal() throws {
        // Red team, sixteenth pass: the latest report won, so an UPDATE_AVAILABLE dated after a
        // REVOKED lifted it, and so did a certification in an unsigned --metadata payload merged
        // with the signed BLOB that revoked the authenticator.
        for later in ["UPDATE_AVAILABLE", "FIDO_CERTIFIED_L2", "USER_VERIFICATION_BYPASS"] {
            let one = try Self.anchors([("FIDO_CERTIFIED", "2024-01-01"), ("REVOKED", "2029-01-01"), (later, "2029-06-01")])
            #expect(one.metadataEntry(for: Self.aaguid)?.status(at: Self.start)?.rawValue == "REVOKED", "\(later)")
            let revoked = try Self.anchors([("REVOKED", "2029-01-01")]).metadata.filter { $0.aaguid == Self.aaguid }
            let local = try Self.anchors([(later, "2029-06-01")]).metadata.filter { $0.aaguid == Self.aaguid }
            for sources in [[revoked, local], [local, revoked]] {
                var anchors = TrustAnchors.builtIn
                for entries in sources { anchors.add(entries) }
                #expect(anchors.metadataEntry(for: Self.aaguid)?.status(at: Self.start)?.rawValue == "REVOKED", "\(later)")
            }
        }
        // Not before its date.
        let future = try Self.anchors([("FIDO_CERTIFIED", "2024-01-01"), ("REVOKED", "2031-01-01")])
        #expect(future.metadataEntry(for: Self.aaguid)?.status(at: Self.start)?.rawValue == "FIDO_CERTIFIED")
    }

    @Test("a BLOB entry whose status reports cannot be read, or whose identity disagrees with its statement, anchors no trust")
    func unreadableEntries() throws {
        // Red team, sixteenth pass: a statusReports that was not an array, or a report with a
        // numeric status, was read as no report (so not revoked), and an entry's own AAGUID or
        // key identifiers were ignored when its statement named others.
        let statement = Self.authority.metadataStatement(aaguid: Self.aaguid, description: "live trust key")
        let other = AAGUID(bytes: [UInt8](repeating: 0x7d, count: 16))!
        func read(_ entry: JSONObject) throws -> FIDOMetadata {
            try FIDOMetadata.payload(["no": 1, "nextUpdate": "2099-01-01", "entries": [.object(entry)]])
        }
        let good: JSONObject = ["aaguid": .string(Self.aaguid.description), "metadataStatement": statement]
        #expect(try read(good).entries.first?.rootCertificates.isEmpty == false)
        for reports: JSONValue in ["REVOKED", ["status": "REVOKED"], 5, [["status": 5]], [["status": "FIDO_CERTIFIED"], ["effectiveDate": "2024-01-01"]]] {
            var entry = good
            entry["statusReports"] = reports
            let loaded = try read(entry)
            #expect(loaded.skipped == 1 && loaded.entries.allSatisfy(\.rootCertificates.isEmpty), "\(reports)")
        }
        // A compromise it does report still counts.
        var mixed = good
        mixed["statusReports"] = [["status": "REVOKED"], ["status": 7]]
        let kept = try read(mixed)
        #expect(kept.entries.count == 1 && kept.entries[0].rootCertificates.isEmpty && kept.entries[0].status?.rawValue == "REVOKED")
        // The entry's AAGUID differs from its statement's: no trust; a compromise applies to both.
        var disagreeing = good
        disagreeing["aaguid"] = .string(other.description)
        #expect(try read(disagreeing).entries.isEmpty)
        disagreeing["statusReports"] = [["status": "ATTESTATION_KEY_COMPROMISE", "effectiveDate": "2025-01-01"]]
        let both = try read(disagreeing)
        #expect(Set(both.entries.compactMap(\.aaguid)) == [Self.aaguid, other] && both.entries.allSatisfy(\.rootCertificates.isEmpty))
        // The same for U2F key identifiers given in both places.
        var u2f = statement.objectValue!
        u2f["aaguid"] = nil
        u2f["attestationCertificateKeyIdentifiers"] = ["aabb"]
        let keys: JSONObject = ["attestationCertificateKeyIdentifiers": ["ccdd"], "metadataStatement": .object(u2f)]
        #expect(try read(keys).entries.isEmpty)
        var sameKeys = keys
        sameKeys["attestationCertificateKeyIdentifiers"] = ["AABB"]
        #expect(try read(sameKeys).entries.first?.rootCertificates.isEmpty == false)
        var revokedKeys = keys
        revokedKeys["statusReports"] = [["status": "REVOKED"]]
        #expect(Set(try read(revokedKeys).entries.flatMap(\.attestationCertificateKeyIdentifiers)) == ["aabb", "ccdd"])
        // Red team, seventeenth pass: an identity that is there but cannot be read agreed with
        // anything, and the entry's revocation then applied to no AAGUID.
        for unreadable: JSONValue in [.null, "not-a-uuid", ["x": 1]] {
            var statementWith = statement.objectValue!
            statementWith["aaguid"] = unreadable
            statementWith["aaid"] = "1234#5678"
            let entry: JSONObject = [
                "aaguid": .string(Self.aaguid.description), "metadataStatement": .object(statementWith), "statusReports": [["status": "REVOKED"]],
            ]
            let loaded = try read(entry)
            #expect(loaded.entries.count == 1 && loaded.entries[0].aaguid == Self.aaguid && loaded.entries[0].rootCertificates.isEmpty, "\(unreadable)")
        }
        for ids: JSONValue in ["aabb", [5], .null] {
            var entry = sameKeys
            entry["attestationCertificateKeyIdentifiers"] = ids
            #expect(try read(entry).entries.allSatisfy(\.rootCertificates.isEmpty), "\(ids)")
        }
        var lone = revokedKeys
        lone["attestationCertificateKeyIdentifiers"] = "CCDD"
        #expect(Set(try read(lone).entries.flatMap(\.attestationCertificateKeyIdentifiers)) == ["aabb", "ccdd"])
        // More reports than are read: no trust, and a compromise among them, past the 64th, counts
        // (64 certifications then REVOKED read as certified).
        var long = good
        long["statusReports"] = .array(
            Array(repeating: ["status": "FIDO_CERTIFIED_L1", "effectiveDate": "2019-01-01"], count: 64) + [
                ["status": "REVOKED", "effectiveDate": "2020-01-01"], ["status": "REVOKED", "effectiveDate": "2021-01-01"],
            ])
        let capped = try read(long)
        #expect(
            capped.entries.count == 1 && capped.entries[0].rootCertificates.isEmpty
                && capped.entries[0].statusReports.map(\.status.rawValue) == ["REVOKED", "REVOKED"])
        #expect(capped.entries[0].status(at: Self.start)?.rawValue == "REVOKED")
        long["statusReports"] = .array(Array(repeating: ["status": "FIDO_CERTIFIED_L1"], count: 64) + [["status": 5]])
        #expect(try read(long).entries.isEmpty)
    }

    @Test("a payload may list one authenticator in at most eight entries: merging many cost in their square")
    func entriesPerAuthenticator() throws {
        // Red team, seventeenth pass: 400 entries of one AAGUID with 64 dated reports each (1.6 MB)
        // took 103 s to load, and a signed BLOB of 200 kept serve from listening for 14 s.
        let statement = Self.authority.metadataStatement(aaguid: Self.aaguid, description: "live trust key")
        func payload(_ count: Int) -> JSONValue {
            let entry: JSONValue = [
                "aaguid": .string(Self.aaguid.description), "metadataStatement": statement,
                "statusReports": .array((0..<64).map { ["status": "FIDO_CERTIFIED_L1", "effectiveDate": .string("20\(10 + $0 / 12)-0\(1 + $0 % 9)-01")] }),
            ]
            return ["no": 1, "nextUpdate": "2099-01-01", "entries": .array(Array(repeating: entry, count: count))]
        }
        var anchors = TrustAnchors.builtIn
        anchors.add(try FIDOMetadata.payload(payload(FIDOMetadata.maxEntriesPerAuthenticator)).entries)
        #expect(anchors.metadataEntry(for: Self.aaguid)?.rootCertificates.isEmpty == false)
        #expect(errorCode { _ = try FIDOMetadata.payload(payload(FIDOMetadata.maxEntriesPerAuthenticator + 1)) } == "metadata_invalid")
    }

    @Test("entries chained by shared key identifiers merge in bounded reports; the status now is kept")
    func chainedEntries() throws {
        // Red team, re-check of the seventeenth pass: entry i named keys k(i-1) and k(i), so no key
        // passed the cap of 8 entries, and each entry took on every report before it (800
        // entries, 1 MB: 10 s, 763 MB).
        let statement = Self.authority.metadataStatement(aaguid: Self.aaguid, description: "chain").objectValue!
        func key(_ i: Int) -> JSONValue { .string(String(format: "%040x", i)) }
        let entries: [JSONValue] = (1...300).map { i in
            var u2f = statement
            u2f["aaguid"] = nil
            u2f["attestationCertificateKeyIdentifiers"] = [key(i - 1), key(i)]
            let reports: [JSONValue] = (0..<64).map { n in
                ["status": i == 1 && n == 0 ? "REVOKED" : "FIDO_CERTIFIED_L1", "effectiveDate": .string("20\(10 + n / 12)-0\(1 + n % 9)-01")]
            }
            return ["attestationCertificateKeyIdentifiers": [key(i - 1), key(i)], "metadataStatement": .object(u2f), "statusReports": .array(reports)]
        }
        var anchors = TrustAnchors.builtIn
        anchors.add(try FIDOMetadata.payload(["no": 1, "nextUpdate": "2099-01-01", "entries": .array(entries)]).entries)
        #expect((anchors.metadata.map(\.statusReports.count).max() ?? 0) <= MetadataEntry.maxMergedReports)
        let last = try #require(anchors.metadata.last)
        #expect(last.status(at: Self.start)?.rawValue == "REVOKED")
        // Condensed, the status now is the same, and a compromise after a lifting report stays.
        let day = { (text: String) in FIDOMetadata.day(text)! }
        let many =
            (0..<70).map {
                StatusReport(
                    status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED_L1"), effectiveDate: day("2010-01-01").addingTimeInterval(Double($0) * 86_400))
            }
            + [
                StatusReport(status: AuthenticatorStatus(rawValue: "USER_VERIFICATION_BYPASS"), effectiveDate: day("2020-01-01")),
                StatusReport(status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED_L2"), effectiveDate: day("2021-01-01")),
                StatusReport(status: AuthenticatorStatus(rawValue: "USER_VERIFICATION_BYPASS"), effectiveDate: day("2023-01-01")),
            ]
        let condensed = MetadataEntry.condensed(many)
        #expect(condensed.count <= 6)
        let before = MetadataEntry(aaguid: Self.aaguid, description: "x", rootCertificates: [], statusReports: many)
        let after = MetadataEntry(aaguid: Self.aaguid, description: "x", rootCertificates: [], statusReports: condensed)
        #expect(before.status(at: Self.start) == after.status(at: Self.start) && after.status(at: Self.start)?.rawValue == "USER_VERIFICATION_BYPASS")
    }

    @Test("a flag keeps a bounded authenticator name, so that it reads back whole")
    func flagNameBounded() throws {
        // Red team, re-check of the seventeenth pass: a 5,000-character description (or 700 line
        // separators, six bytes each escaped) made the stored REVOKED flag unreadable.
        for name in [String(repeating: "a", count: 5000), String(repeating: "\u{2028}", count: 700), String(repeating: "\u{1F600}", count: 900)] {
            let flag = CredentialFlag(status: .revoked, authenticator: name, since: Self.start, attested: true)
            let text = flag.json.serialized()
            let read = (try? JSONValue.parse(text, limits: JSONLimits(maxBytes: 4096, maxDepth: 2))).flatMap(CredentialFlag.init(json:))
            #expect(read == flag, "\(text.utf8.count) bytes")
        }
    }

    @Test("the audit never clears a REVOKED flag, nor replaces it with another compromise")
    func revokedFlagIsFinal() async throws {
        // Red team, seventeenth pass: metadata listing only a later certification cleared it.
        let store = InMemoryCredentialStore()
        let key = try COSEKey(bytes: CBOREncoder.encode(try SigningKey.generate(.es256).coseKey()))
        let since = try #require(FIDOMetadata.day("2020-01-01"))
        for (n, status) in ["REVOKED", "USER_VERIFICATION_BYPASS"].enumerated() {
            try await store.insert(
                CredentialRecord(
                    id: [UInt8(n + 1)], userHandle: [1], publicKey: key, signCount: 0, uvInitialized: true, backupEligible: false, backupState: false,
                    aaguid: Self.aaguid, attestationFormat: .none, createdAt: since,
                    flag: CredentialFlag(status: AuthenticatorStatus(rawValue: status), authenticator: "x", since: since, attested: false)))
        }
        for later in ["FIDO_CERTIFIED_L1", "ATTESTATION_KEY_COMPROMISE"] {
            let report = try await CredentialAudit.run(store: store, anchors: try Self.anchors([(later, "2021-01-01")]), at: Self.start, write: true)
            #expect(report.keptFlagged == 1, "\(later): \(report.json)")
            #expect(try await store.credential(id: [1])?.flag?.status == .revoked, "\(later)")
        }
        // The other compromise is lifted by the later certification, as before.
        #expect(try await store.credential(id: [2])?.flag?.status.rawValue == "ATTESTATION_KEY_COMPROMISE")
        _ = try await CredentialAudit.run(store: store, anchors: try Self.anchors([("FIDO_CERTIFIED_L2", "2029-01-01")]), at: Self.start)
        #expect(try await store.credential(id: [2])?.flag == nil)
    }
}

/// Red team, round 28: metadata that cost before it was verified, an old BLOB's roots, and an
/// entry with as many roots as fit in a BLOB.
extension LiveTrustTests {
    @Test("of several BLOBs, the one with the highest no supplies an authenticator's roots, whatever the order they are added in")
    func newestBLOBRoots() throws {
        // The BLOB added last supplied the roots: an older FIDO-signed BLOB put back roots a newer
        // one had removed (real BLOBs 85 and 29, ATKey.Pro), and in a folder `…no9.jwt` sorts after
        // `…no85.jwt`.
        let statement = Self.authority.metadataStatement(aaguid: Self.aaguid, description: "live trust key")
        var moved = statement.objectValue!
        let otherRoot = try #require(TrustAnchors.builtIn.formatRoots[.apple]?.first)
        moved["attestationRootCertificates"] = [.string(Data(otherRoot.der).base64EncodedString())]
        func blob(_ no: Int?, _ statement: JSONValue, nextUpdate: String = "2099-01-01") throws -> FIDOMetadata {
            var payload: JSONObject = [
                "nextUpdate": .string(nextUpdate), "entries": [["aaguid": .string(Self.aaguid.description), "metadataStatement": statement]],
            ]
            if let no { payload["no"] = .number(Double(no)) }
            return try FIDOMetadata.payload(.object(payload))
        }
        // A folder of decoded payloads (`--metadata FOLDER`) in the same order, whatever the file
        // names (re-check of round 28: by name, `b-no9.json` after `a-no85.json` won).
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("payloads-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for (name, no, listed) in [("a-no85.json", 85, JSONValue.object(moved)), ("b-no9.json", 9, statement)] {
            let payload: JSONValue = [
                "no": .number(Double(no)), "nextUpdate": "2099-01-01", "entries": [["aaguid": .string(Self.aaguid.description), "metadataStatement": listed]],
            ]
            try Data(payload.serializedBytes()).write(to: folder.appendingPathComponent(name))
        }
        var fromFolder = TrustAnchors.builtIn
        fromFolder.add(try FIDOMetadata.load(path: folder.path, at: Self.start).entries)
        #expect(fromFolder.metadataEntry(for: Self.aaguid)?.rootCertificates.map(\.der) == [otherRoot.der], "a folder of payloads")
        let older = try blob(9, statement), newer = try blob(85, .object(moved)), undated = try blob(nil, statement)
        // The same `no` twice (re-check of round 28: ordered as given): the later nextUpdate is newer.
        let sameNo = try blob(85, statement, nextUpdate: "2098-01-01")
        for order in [[newer, older], [older, newer], [newer, undated, older], [undated, newer], [newer, sameNo], [sameNo, newer]] {
            var anchors = TrustAnchors.builtIn
            anchors.add(order)
            let newest = anchors.metadataEntry(for: Self.aaguid)?.rootCertificates.map(\.der) == [otherRoot.der]
            #expect(newest, "\(order.map(\.serial))")
        }
    }

    @Test("a forged BLOB is refused before its payload is parsed")
    func blobVerifiedBeforeParsed() throws {
        // A forged, unsigned 32 MiB BLOB cost 10 s and 892 MB in a debug build before its chain
        // was looked at: the payload was parsed first. A payload that is not JSON shows the order.
        let root = try #require(TrustAnchors.builtIn.formatRoots[.apple]?.first)
        let header = Base64URL.encode(Array(#"{"alg":"ES256","x5c":["\#(Data(root.der).base64EncodedString())"]}"#.utf8))
        let jwt = Array("\(header).\(Base64URL.encode(Array("[[[[ not JSON".utf8))).\(Base64URL.encode([1, 2, 3]))".utf8)
        #expect(throws: WebAuthnError.self) { try FIDOMetadata.blob(jwt: jwt, at: Self.start) }
        do {
            _ = try FIDOMetadata.blob(jwt: jwt, at: Self.start)
        } catch {
            #expect(error.code == .metadataUntrusted && error.message.hasPrefix("the BLOB signing chain"), "\(error.message)")
        }
    }

    @Test("an entry listing more attestation roots than any real one anchors nothing, and keeps its compromise")
    func rootsPerEntryBounded() throws {
        // 30,000 roots in one entry cost 27 s on every registration that claimed it (quadratic in
        // OpenSSL's store); the most in a real BLOB is 39.
        var statement = Self.authority.metadataStatement(aaguid: Self.aaguid, description: "live trust key").objectValue!
        let root = statement["attestationRootCertificates"]!.arrayValue![0]
        func read(_ count: Int) throws -> FIDOMetadata {
            statement["attestationRootCertificates"] = .array(Array(repeating: root, count: count))
            return try FIDOMetadata.payload([
                "no": 1, "nextUpdate": "2099-01-01",
                "entries": [["aaguid": .string(Self.aaguid.description), "metadataStatement": .object(statement), "statusReports": [["status": "REVOKED"]]]],
            ])
        }
        #expect(try read(FIDOMetadata.maxRootsPerEntry).entries.first?.rootCertificates.count == FIDOMetadata.maxRootsPerEntry)
        let over = try read(FIDOMetadata.maxRootsPerEntry + 1)
        #expect(over.skipped == 1 && over.entries.count == 1 && over.entries[0].rootCertificates.isEmpty)
        #expect(over.entries[0].status(at: Self.start)?.rawValue == "REVOKED")
    }

    @Test("an entry with more status reports than are read keeps every compromise that names a certificate")
    func namedCompromisesPastTheLimit() throws {
        // Re-check of round 28 (N5): past 64 reports the entry's compromises were condensed to
        // three per status, and a leaked key named by the 35th of 70 was trusted.
        let leaked = try (0..<70).map { i in
            let key = try SigningKey.generate(.es256)
            return try CertificateBuilder.certificateAuthority(organization: "leaked", name: "leaked \(i)").build(key: key, issuer: nil, issuerKey: key)
        }
        let reports: [JSONValue] = leaked.map {
            ["status": "ATTESTATION_KEY_COMPROMISE", "effectiveDate": "2025-01-01", "certificate": .string(Data($0.der).base64EncodedString())]
        }
        let statement = Self.authority.metadataStatement(aaguid: Self.aaguid, description: "many reports")
        let metadata = try FIDOMetadata.payload([
            "no": 1, "nextUpdate": "2099-01-01",
            "entries": [["aaguid": .string(Self.aaguid.description), "metadataStatement": statement, "statusReports": .array(reports)]],
        ])
        var anchors = TrustAnchors.builtIn
        anchors.add(metadata.entries)
        for certificate in leaked {
            #expect(anchors.compromise(ofKeyOf: certificate, at: Self.start)?.report.status.rawValue == "ATTESTATION_KEY_COMPROMISE")
        }
        #expect(anchors.compromise(ofKeyOf: Self.authority.root, at: Self.start) == nil, "a key nobody named")
    }
}
