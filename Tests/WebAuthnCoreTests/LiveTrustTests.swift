import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnTesting
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Metadata that changes under a running engine: status reports that apply from their
/// effective date, and trust anchors swapped for new ceremonies while one in flight keeps
/// the snapshot it read.
@Suite("Live trust: dated status and hot swap")
struct LiveTrustTests {
    static let authority = try! AttestationAuthority.generate()
    static let aaguid = AAGUID(bytes: [UInt8](repeating: 0x6c, count: 16))!
    /// 2030-01-01T00:00:00Z.
    static let start = Date(timeIntervalSince1970: 1_893_456_000)

    /// Anchors holding one BLOB entry for the test authority's model, with these status reports.
    static func anchors(_ reports: [(status: String, date: String?)], friendlyNames: JSONValue? = nil) throws -> TrustAnchors {
        var statement = authority.metadataStatement(aaguid: aaguid, description: "live trust key").objectValue!
        if let friendlyNames { statement["friendlyNames"] = friendlyNames }
        let payload: JSONValue = [
            "no": 1, "nextUpdate": "2099-01-01",
            "entries": [
                [
                    "aaguid": .string(aaguid.description), "metadataStatement": .object(statement),
                    "statusReports": .array(
                        reports.map { report in
                            var object: JSONObject = ["status": .string(report.status)]
                            if let date = report.date { object["effectiveDate"] = .string(date) }
                            return .object(object)
                        }),
                ]
            ],
        ]
        var anchors = TrustAnchors.builtIn
        anchors.add(try FIDOMetadata.payload(payload).entries)
        return anchors
    }

    /// An engine that requires trusted attestation, on a movable clock.
    static func engine(_ anchors: TrustAnchors, clock: TestClock, challenges: (any ChallengeStore)? = nil) throws -> WebAuthnEngine {
        let rp = try RelyingParty(
            id: "example.com", origins: ["https://example.com"],
            policy: VerificationPolicy(attestation: AttestationPolicy(requireTrustedAttestation: true)), clock: clock.clock, trustAnchors: anchors)
        let credentials = InMemoryCredentialStore()
        return WebAuthnEngine(relyingParty: rp, credentials: credentials, challenges: challenges ?? InMemoryChallengeStore(clock: clock.clock))
    }

    /// A full packed attestation from the authority's model, registered with `engine`.
    static func register(_ engine: WebAuthnEngine) async throws -> RegistrationResult {
        var profile = SoftwareAuthenticator.Profile.securityKey
        profile.aaguid = aaguid.bytes
        let user = UserEntity.new(name: "user-\(UUID().uuidString.prefix(8))")
        let options = try await engine.startRegistration(user: user, attestation: .direct)
        let parts = try SoftwareAuthenticator(profile: profile).register(
            rpId: "example.com", origin: "https://example.com", challenge: options.challenge, userHandle: user.id,
            attestation: .packedFull(authority))
        return try await engine.finishRegistration(json: parts.jsonBytes)
    }

    @Test(
        "a compromise status refuses registration under trusted attestation from its effectiveDate, not before",
        arguments: ["REVOKED", "ATTESTATION_KEY_COMPROMISE", "USER_VERIFICATION_BYPASS", "USER_KEY_REMOTE_COMPROMISE", "USER_KEY_PHYSICAL_COMPROMISE"])
    func compromiseFromItsDate(status: String) async throws {
        let clock = EngineTests.movableClock()
        let engine = try Self.engine(try Self.anchors([("FIDO_CERTIFIED_L1", "2024-01-01"), (status, "2030-06-01")]), clock: clock)
        // Before the report's date: the certified status applies.
        let before = try await Self.register(engine)
        #expect(before.trust.trusted && before.trust.metadata?.description == "live trust key")
        // From its date on: refused.
        clock.advance(by: 181 * 86_400)  // 2030-07-01
        #expect(await errorCode { _ = try await Self.register(engine) } == "authenticator_compromised")
    }

    @Test("the latest report in effect applies: a later certification lifts an earlier compromise; an undated report applies at once")
    func latestReportInEffect() async throws {
        let clock = EngineTests.movableClock()
        let lifted = try Self.engine(try Self.anchors([("USER_VERIFICATION_BYPASS", "2025-01-01"), ("FIDO_CERTIFIED_L2", "2026-01-01")]), clock: clock)
        #expect(try await Self.register(lifted).trust.trusted)
        let undated = try Self.engine(try Self.anchors([("REVOKED", nil)]), clock: clock)
        #expect(await errorCode { _ = try await Self.register(undated) } == "authenticator_compromised")
        // A report applies from the start of its day (UTC).
        let entry = try #require(try Self.anchors([("REVOKED", "2029-12-31")]).metadataEntry(for: Self.aaguid))
        #expect(entry.status(at: Self.start)?.rawValue == "REVOKED" && entry.status(at: Self.start.addingTimeInterval(-2 * 86_400)) == nil)
    }

    @Test("status(at:): dates read as UTC days, on one day a compromise wins, an undated compromise applies always")
    func statusRules() throws {
        let day = try #require(FIDOMetadata.day("2030-06-01"))
        #expect(day == Date(timeIntervalSince1970: 1_906_502_400))
        #expect(FIDOMetadata.day("2024-02-29T10:00:00Z") == Date(timeIntervalSince1970: 1_709_164_800))
        for bad in ["2023-02-29", "2030-13-01", "2030-6-1", "", "20300601", "2030-06-01X"] { #expect(FIDOMetadata.day(bad) == nil, "\(bad)") }
        let sameDay = MetadataEntry(
            aaguid: Self.aaguid, description: "x", rootCertificates: [],
            statusReports: [
                StatusReport(status: AuthenticatorStatus(rawValue: "REVOKED"), effectiveDate: day),
                StatusReport(status: AuthenticatorStatus(rawValue: "FIDO_CERTIFIED"), effectiveDate: day),
            ])
        #expect(sameDay.status(at: day)?.rawValue == "REVOKED" && sameDay.status?.rawValue == "REVOKED")
        #expect(sameDay.status(at: day.addingTimeInterval(-1)) == nil)
        // An undated compromise (or one whose date cannot be read) applies at any time and is
        // superseded by no dated report (red team, sixteenth pass: a certification beside it won).
        for undated in ["not a date", nil] as [String?] {
            let anchors = try Self.anchors([("FIDO_CERTIFIED", "2024-01-01"), ("REVOKED", undated), ("FIDO_CERTIFIED_L2", "2029-01-01")])
            #expect(anchors.metadataEntry(for: Self.aaguid)?.status(at: Self.start)?.rawValue == "REVOKED")
            #expect(anchors.metadataEntry(for: Self.aaguid)?.status(at: Date(timeIntervalSince1970: 0))?.rawValue == "REVOKED")
        }
        // A status MDS3 does not define is not taken into account (it lifted a revocation).
        for unknown in ["revoked", "REVOKED ", "TOTALLY_FINE"] {
            let anchors = try Self.anchors([("REVOKED", "2029-01-01"), (unknown, "2029-06-01")])
            #expect(anchors.metadataEntry(for: Self.aaguid)?.status(at: Self.start)?.rawValue == "REVOKED", "\(unknown)")
        }
        // An undated certification is still superseded by a dated compromise.
        let dated = try Self.anchors([("FIDO_CERTIFIED", nil), ("REVOKED", "2025-01-01")])
        #expect(dated.metadataEntry(for: Self.aaguid)?.status(at: Self.start)?.rawValue == "REVOKED")
    }

    @Test("entries for one authenticator from several sources keep every status report: a compromise is hidden by no older source, in any order")
    func mergedSources() throws {
        // Red team, sixteenth pass: sources were merged last-wins, so an older FIDO-signed BLOB
        // (or a plain statement, or a second entry in one BLOB) loaded after the one reporting a
        // compromise un-revoked the authenticator.
        let revoked = try Self.anchors([("FIDO_CERTIFIED", "2024-01-01"), ("REVOKED", "2029-06-01")]).metadata.filter { $0.aaguid == Self.aaguid }
        let older = try Self.anchors([("FIDO_CERTIFIED_L1", "2024-01-01")]).metadata.filter { $0.aaguid == Self.aaguid }
        let statement = [try FIDOMetadata.statementEntry(["aaguid": .string(Self.aaguid.description), "description": "plain statement"], status: nil)]
        for sources in [[revoked, older], [older, revoked], [revoked, statement], [statement, revoked], [revoked + older]] {
            var anchors = TrustAnchors.builtIn
            for entries in sources { anchors.add(entries) }
            #expect(anchors.metadataEntry(for: Self.aaguid)?.status(at: Self.start)?.rawValue == "REVOKED", "\(sources.map { $0.map(\.description) })")
        }
        // An entry kept only for its compromise (no roots) does not take the roots away before its date.
        var withBare = TrustAnchors.builtIn
        withBare.add(older)
        withBare.add([
            MetadataEntry(
                aaguid: Self.aaguid, description: "unreadable statement", rootCertificates: [],
                statusReports: [StatusReport(status: AuthenticatorStatus(rawValue: "REVOKED"), effectiveDate: Self.start.addingTimeInterval(86_400))])
        ])
        let bare = try #require(withBare.metadataEntry(for: Self.aaguid))
        #expect(!bare.rootCertificates.isEmpty && bare.status(at: Self.start)?.rawValue == "FIDO_CERTIFIED_L1")
        // A later report does supersede a compromise other than REVOKED, from whichever source.
        let bypass = try Self.anchors([("FIDO_CERTIFIED", "2024-01-01"), ("USER_VERIFICATION_BYPASS", "2029-06-01")]).metadata.filter {
            $0.aaguid == Self.aaguid
        }
        let lifted = try Self.anchors([("USER_VERIFICATION_BYPASS", "2029-06-01"), ("FIDO_CERTIFIED_L2", "2029-09-01")]).metadata.filter {
            $0.aaguid == Self.aaguid
        }
        for sources in [[bypass, lifted], [lifted, bypass]] {
            var anchors = TrustAnchors.builtIn
            for entries in sources { anchors.add(entries) }
            #expect(anchors.metadataEntry(for: Self.aaguid)?.status(at: Self.start)?.rawValue == "FIDO_CERTIFIED_L2")
        }
    }

    @Test("provider names and icons come with the metadata entry")
    func providerNames() throws {
        let anchors = try Self.anchors(
            [], friendlyNames: ["en-US": "Live Key", "de-DE": "Live-Schlüssel", "fr": .number(3)])
        let entry = try #require(anchors.metadataEntry(for: Self.aaguid))
        #expect(entry.friendlyNames == ["en-US": "Live Key", "de-DE": "Live-Schlüssel"])
        #expect(entry.displayName() == "Live Key" && entry.displayName(language: "de-AT") == "Live-Schlüssel")
        #expect(entry.displayName(language: "ja") == "Live Key")
        #expect(try #require(try Self.anchors([]).metadataEntry(for: Self.aaguid)).displayName() == "live trust key")
        let icon = try FIDOMetadata.statementEntry(["aaguid": .string(Self.aaguid.description), "icon": "data:image/png;base64,iVBORw0KGgo="], status: nil)
        #expect(icon.icon == "data:image/png;base64,iVBORw0KGgo=")
        #expect(try FIDOMetadata.statementEntry(["aaguid": .string(Self.aaguid.description), "icon": "https://example.com/i.png"], status: nil).icon == nil)
        #expect(TrustAnchors.builtIn.metadataEntry(for: Self.aaguid) == nil)
    }

    @Test("updateTrustAnchors: new ceremonies use the new anchors at once, every copy of the engine sees them")
    func hotSwap() async throws {
        let clock = EngineTests.movableClock()
        let engine = try Self.engine(try Self.anchors([("FIDO_CERTIFIED", "2024-01-01")]), clock: clock)
        let copy = engine
        #expect(try await Self.register(engine).trust.trusted)
        copy.updateTrustAnchors(try Self.anchors([("FIDO_CERTIFIED", "2024-01-01"), ("ATTESTATION_KEY_COMPROMISE", "2029-01-01")]))
        #expect(engine.relyingParty.trustAnchors.metadataEntry(for: Self.aaguid)?.status?.rawValue == "ATTESTATION_KEY_COMPROMISE")
        #expect(await errorCode { _ = try await Self.register(engine) } == "authenticator_compromised")
        // Without the model's metadata, its chain leads to no root: untrusted, refused under required trust.
        engine.updateTrustAnchors(.builtIn)
        #expect(await errorCode { _ = try await Self.register(engine) } == "attestation_untrusted")
    }

    /// A challenge store whose lookups wait at a gate while it is closed.
    final class GatedChallenges: ChallengeStore {
        let inner: InMemoryChallengeStore
        let state = Locked<(closed: Bool, waiting: [CheckedContinuation<Void, Never>], arrived: Int)>((false, [], 0))
        init(clock: WebAuthnClock) { inner = InMemoryChallengeStore(clock: clock) }

        func close() { state.withLock { $0.closed = true } }
        func open() {
            let waiting = state.withLock { s -> [CheckedContinuation<Void, Never>] in
                s.closed = false
                defer { s.waiting = [] }
                return s.waiting
            }
            for continuation in waiting { continuation.resume() }
        }
        var arrived: Int { state.withLock { $0.arrived } }

        func insert(_ ceremony: PendingCeremony) async throws { try await inner.insert(ceremony) }
        func pending(challenge: [UInt8]) async throws -> PendingCeremony? {
            await withCheckedContinuation { continuation in
                let wait = state.withLock { s -> Bool in
                    s.arrived += 1
                    if s.closed { s.waiting.append(continuation) }
                    return s.closed
                }
                if !wait { continuation.resume() }
            }
            return try await inner.pending(challenge: challenge)
        }
        func consume(challenge: [UInt8]) async throws -> PendingCeremony? { try await inner.consume(challenge: challenge) }
        func sweep(expiredBefore date: Date) async throws -> Int { try await inner.sweep(expiredBefore: date) }
    }

    @Test("a registration already finishing completes with the anchors it read; the next one uses the new")
    func inFlightKeepsItsSnapshot() async throws {
        let clock = EngineTests.movableClock()
        let gate = GatedChallenges(clock: clock.clock)
        let engine = try Self.engine(try Self.anchors([("FIDO_CERTIFIED", "2024-01-01")]), clock: clock, challenges: gate)
        gate.close()
        let inFlight = Task { try await Self.register(engine) }
        // It has read its anchors and waits for its ceremony lookup.
        while gate.arrived == 0 { try await Task.sleep(for: .milliseconds(5)) }
        engine.updateTrustAnchors(try Self.anchors([("REVOKED", "2024-06-01")]))
        gate.open()
        #expect(try await inFlight.value.trust.trusted)
        #expect(await errorCode { _ = try await Self.register(engine) } == "authenticator_compromised")
    }
}
