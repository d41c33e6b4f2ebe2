internal import Foundation
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// The contract checks of credential stores: inserts, names, the re-audit, concurrent writes, the counter.
extension StoreContract {
    static func concurrentWritesCheck(_ stores: Stores) async throws {
        let credentials = stores.credentials
        let taken = try record()
        try await credentials.insert(taken)
        // 48 inserts at once, every third one a duplicate of a stored ID: each duplicate is refused
        // with its own code, and the others are stored, whatever group they were committed in.
        let attempts = try (0..<48).map { i in i % 3 == 0 ? try record(taken.id, user: Array("dup\(i)".utf8)) : try record() }
        let outcomes = await withTaskGroup(of: (Int, String?).self) { group in
            for (i, r) in attempts.enumerated() { group.addTask { (i, await errorCode { try await credentials.insert(r) }) } }
            return await group.reduce(into: [Int: String?]()) { $0[$1.0] = $1.1 }
        }
        for (i, r) in attempts.enumerated() {
            if i % 3 == 0 {
                try expect(outcomes[i] == "credential_already_registered", "duplicate \(i): \(String(describing: outcomes[i]))")
            } else {
                try expect(outcomes[i] == .some(nil), "insert \(i): \(String(describing: outcomes[i]))")
                try expect(try await credentials.credential(id: r.id) != nil, "acknowledged insert \(i) is stored")
            }
        }
        try expect(try await credentials.credential(id: taken.id)?.userHandle == taken.userHandle, "the first owner keeps its credential")
        // Concurrent challenge inserts and consumes: each consumed exactly once.
        let challenges = stores.challenges
        let ceremonies = try (0..<32).map { _ in try ceremony(binding: nil) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for c in ceremonies { group.addTask { try await challenges.insert(c) } }
            try await group.waitForAll()
        }
        let consumed = await withTaskGroup(of: Int.self) { group in
            for c in ceremonies + ceremonies { group.addTask { (try? await challenges.consume(challenge: c.challenge)) == nil ? 0 : 1 } }
            return await group.reduce(0, +)
        }
        try expect(consumed == ceremonies.count, "\(consumed) consumed of \(ceremonies.count)")
    }

    static func credentialsCheck(_ stores: Stores) async throws {
        let credentials = stores.credentials
        let r = try record()
        try await credentials.insert(r)
        let back = try require(try await credentials.credential(id: r.id), "a value")
        try expect(back.userHandle == r.userHandle && back.publicKey.bytes == r.publicKey.bytes && back.signCount == 0)
        try expect(back.transports == ["usb", "nfc"] && back.backupEligible && !back.backupState && back.aaguid == r.aaguid)
        try expect(back.attestationFormat == "packed" && back.createdAt == r.createdAt && back.lastUsedAt == nil)
        try expect(back.name == nil && back.properties == r.properties, "properties read back as \(back.properties)")
        try await expectThrows { try await credentials.insert(try record(r.id)) }
        try await credentials.insert(try record(user: Array("u2".utf8)))
        try expect(try await credentials.credentials(forUser: r.userHandle).count == 1)
        try expect(try await credentials.delete(id: r.id))
        try expect(!(try await credentials.delete(id: r.id)))
        try expect(try await credentials.credential(id: r.id) == nil)
    }

    static func credentialNamesCheck(_ stores: Stores) async throws {
        let credentials = stores.credentials
        let r = try record(count: 5)
        try await credentials.insert(r)
        try expect(try await credentials.rename(id: r.id, ofUser: r.userHandle, to: "Work laptop — 2 ✓"))
        let named = try require(try await credentials.credential(id: r.id), "the credential")
        try expect(named.name == "Work laptop — 2 ✓", "the name reads back as \(named.name ?? "nil")")
        try expect(named.signCount == 5 && named.properties == r.properties && named.publicKey.bytes == r.publicKey.bytes)
        try expect(!(try await credentials.rename(id: r.id, ofUser: Array("someone else".utf8), to: "mine now")), "another user renamed it")
        try expect(try await credentials.credential(id: r.id)?.name == "Work laptop — 2 ✓")
        try expect(!(try await credentials.rename(id: SecureRandom.bytes(16), ofUser: r.userHandle, to: "x")), "renamed a credential that does not exist")
        try expect(try await credentials.rename(id: r.id, ofUser: r.userHandle, to: nil))
        try expect(try await credentials.credential(id: r.id)?.name == nil, "the name was not cleared")
    }

    static func auditCheck(_ stores: Stores) async throws {
        guard let store = stores.credentials as? any CredentialAuditing else { return }
        let t = Date(timeIntervalSince1970: 1_900_000_000)
        let day: TimeInterval = 86_400
        let u2fCertificate = try AttestationAuthority.generate().packedCertificate(aaguid: [UInt8](repeating: 0, count: 16))
        let keyID = try require(u2fCertificate.publicKeyIdentifier, "the certificate's key identifier")
        func model() throws -> AAGUID { try require(AAGUID(bytes: SecureRandom.bytes(16)), "an AAGUID") }
        let (compromised, fine, future, unknown) = (try model(), try model(), try model(), try model())
        func make(_ aaguid: AAGUID, chain: [[UInt8]] = []) throws -> CredentialRecord {
            let r = try record()
            return CredentialRecord(
                id: r.id, userHandle: r.userHandle, publicKey: r.publicKey, signCount: 0, uvInitialized: true, backupEligible: false,
                backupState: false, aaguid: aaguid, attestationFormat: chain.isEmpty ? .none : .fidoU2F, createdAt: r.createdAt, attestationChain: chain)
        }
        let a = try make(compromised), b = try make(fine), c = try make(.zero, chain: [u2fCertificate.der]), d = try make(future), e = try make(unknown)
        for r in [a, b, c, d, e] { try await store.insert(r) }
        try expect(try await store.credential(id: c.id)?.attestationChain == [u2fCertificate.der], "the attestation chain did not round-trip")
        // A scan in batches of 2 sees each credential once, in byte order.
        var seen: [[UInt8]] = []
        var cursor: [UInt8]?
        while true {
            let batch = try await store.credentials(after: cursor, limit: 2)
            seen += batch.map(\.id)
            guard batch.count == 2 else { break }
            cursor = batch.last?.id
        }
        try expect(
            seen == [a, b, c, d, e].map(\.id).sorted { $0.lexicographicallyPrecedes($1) }, "the scan saw \(seen.count) credentials, not each once in order")
        let anchors = TrustAnchors(metadata: [
            MetadataEntry(
                aaguid: compromised, description: "Key A", rootCertificates: [],
                statusReports: [
                    StatusReport(status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED"), effectiveDate: t - 100 * day),
                    StatusReport(status: AuthenticatorStatus(rawValue: "ATTESTATION_KEY_COMPROMISE"), effectiveDate: t - day),
                ]),
            MetadataEntry(
                aaguid: fine, description: "Key B", rootCertificates: [], statusReports: [StatusReport(status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED"))]
            ),
            MetadataEntry(
                aaguid: nil, attestationCertificateKeyIdentifiers: [keyID], description: "U2F key", rootCertificates: [],
                statusReports: [StatusReport(status: AuthenticatorStatus(rawValue: "REVOKED"))]),
            MetadataEntry(
                aaguid: future, description: "Key D", rootCertificates: [],
                statusReports: [StatusReport(status: AuthenticatorStatus(rawValue: "USER_VERIFICATION_BYPASS"), effectiveDate: t + 10 * day)]),
        ])
        // A dry run reports and writes nothing.
        let dry = try await CredentialAudit.run(store: store, anchors: anchors, at: t, batchSize: 2, write: false)
        let afterDry = try await store.credential(id: a.id)
        try expect(dry.flagged.count == 2 && afterDry?.flag == nil, "a dry run wrote a flag")
        let first = try await CredentialAudit.run(store: store, anchors: anchors, at: t, batchSize: 2)
        try expect(first.scanned == 5, "scanned \(first.scanned)")
        try expect(Set(first.flagged.map(\.credentialId).map(ByteString.init)) == Set([a.id, c.id].map(ByteString.init)), "flagged \(first.flagged.count)")
        let flagA = try require(try await store.credential(id: a.id)?.flag, "A's flag")
        try expect(flagA.status.rawValue == "ATTESTATION_KEY_COMPROMISE" && !flagA.attested && flagA.since == t - day, "A's flag: \(flagA)")
        let flagC = try require(try await store.credential(id: c.id)?.flag, "the U2F credential's flag")
        try expect(flagC.status.rawValue == "REVOKED" && flagC.attested && flagC.authenticator == "U2F key", "C's flag: \(flagC)")
        for r in [b, d, e] { try expect(try await store.credential(id: r.id)?.flag == nil, "an unaffected credential was flagged") }
        // Nothing changed: nothing new. Later, D's report takes effect.
        let again = try await CredentialAudit.run(store: store, anchors: anchors, at: t)
        try expect(again.flagged.isEmpty && again.cleared.isEmpty && again.stillFlagged == 2)
        let later = try await CredentialAudit.run(store: store, anchors: anchors, at: t + 11 * day)
        try expect(later.flagged.map(\.credentialId) == [d.id], "D was not flagged once its report took effect")
        // Metadata that does not list A's or C's authenticator (a BLOB that failed to load)
        // clears nothing: only a report that the compromise is over does (red team: an audit
        // against a rejected BLOB cleared every flag).
        // Nor does metadata that lists A only with an older report (an older BLOB) or none (a
        // statement), or with a certification that takes effect later (red team, sixteenth pass:
        // each of these cleared the flag).
        let olderA = MetadataEntry(
            aaguid: compromised, description: "Key A", rootCertificates: [],
            statusReports: [StatusReport(status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED"), effectiveDate: t - 100 * day)])
        let bareA = MetadataEntry(aaguid: compromised, description: "Key A", rootCertificates: [])
        let laterA = MetadataEntry(
            aaguid: compromised, description: "Key A", rootCertificates: [],
            statusReports: [StatusReport(status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED"), effectiveDate: t + 100 * day)])
        for unlisted in [
            TrustAnchors(), TrustAnchors(metadata: anchors.metadata.filter { $0.aaguid == fine }), TrustAnchors(metadata: [olderA]),
            TrustAnchors(metadata: [bareA]), TrustAnchors(metadata: [laterA]),
        ] {
            let none = try await CredentialAudit.run(store: store, anchors: unlisted, at: t + 11 * day)
            try expect(none.cleared.isEmpty && none.keptFlagged == 3, "an audit without reports lifting A's, C's and D's flags cleared \(none.cleared.count)")
        }
        for r in [a, c, d] { try expect(try await store.credential(id: r.id)?.flag != nil, "a flag was cleared for want of metadata") }
        // A later report that A is certified again clears it; only it.
        var fixed = TrustAnchors(metadata: [
            MetadataEntry(
                aaguid: compromised, description: "Key A", rootCertificates: [],
                statusReports: [
                    StatusReport(status: AuthenticatorStatus(rawValue: "ATTESTATION_KEY_COMPROMISE"), effectiveDate: t - day),
                    StatusReport(status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED"), effectiveDate: t + day),
                ])
        ])
        fixed.add(anchors.metadata.filter { $0.aaguid != compromised })
        let cleared = try await CredentialAudit.run(store: store, anchors: fixed, at: t + 11 * day)
        try expect(cleared.cleared.map(\.credentialId) == [a.id] && cleared.flagged.isEmpty, "cleared \(cleared.cleared.count)")
        let (aNow, cNow) = (try await store.credential(id: a.id), try await store.credential(id: c.id))
        try expect(aNow?.flag == nil && cNow?.flag != nil)
        try expect(!(try await store.setFlag(nil, id: SecureRandom.bytes(16))), "flagged a credential that does not exist")
        // The flag survives the sign-in's counter update.
        let flagged = try require(try await store.credential(id: c.id), "C")
        var used = flagged
        used.signCount = 3
        try expect(try await store.update(used, expectedSignCount: 0))
        try expect(try await store.credential(id: c.id)?.flag == flagged.flag, "a counter update cleared the flag")
    }

    /// Byte strings as set members.
    struct ByteString: Hashable {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
    }

    static func compareAndSetCheck(_ stores: Stores) async throws {
        let credentials = stores.credentials
        var r = try record(count: 5)
        try await credentials.insert(r)
        r.signCount = 6
        r.backupState = true
        r.lastUsedAt = Date(timeIntervalSince1970: 1_850_000_000)
        try expect(!(try await credentials.update(r, expectedSignCount: 4)))
        try expect(try await credentials.update(r, expectedSignCount: 5))
        try expect(!(try await credentials.update(r, expectedSignCount: 5)))
        let back = try require(try await credentials.credential(id: r.id), "a value")
        try expect(back.signCount == 6 && back.backupState && back.lastUsedAt == r.lastUsedAt)
        // Concurrent compare-and-sets from the same count: exactly one wins.
        var next = back
        next.signCount = 7
        let candidate = next
        let wins = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 { group.addTask { (try? await credentials.update(candidate, expectedSignCount: 6)) ?? false } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        try expect(wins == 1)
    }

}
