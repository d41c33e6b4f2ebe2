public import Foundation
public import Logging
public import ServiceLifecycle
public import WebAuthnCore
#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif
internal import _WebAuthnEncoding
package import _WebAuthnCrypto
internal import _WebAuthnHTTP

/// Keeps an engine's FIDO metadata current: fetches the MDS3 BLOB from a metadata service
/// on a schedule, verifies it as ``FIDOMetadata/blob(jwt:at:options:)`` does (its signing
/// chain to the configured root at the engine's time, with CRLs, its signature, its
/// `nextUpdate`), and installs it in the engine (``WebAuthnEngine/updateTrustAnchors(_:)``)
/// only when its `no` is greater than the installed one's.
///
/// Any failure (network, status, size, deadline, signature, chain, an older `no`, a BLOB
/// past its `nextUpdate`) keeps the BLOB installed and is logged with its code. The next
/// fetch follows `nextUpdate` (within ``Configuration/minimumInterval`` and
/// ``Configuration/maximumInterval``, plus jitter); after a failure it retries with an
/// exponential back-off. Requests are conditional (`If-None-Match`, `If-Modified-Since`):
/// `304 Not Modified` keeps the installed BLOB. With a ``Configuration/cacheDirectory``, each
/// BLOB installed from the network is written there atomically, and at start the cached BLOB
/// is verified again and installed, so a restart without network starts from the last good one.
/// One fetch runs at a time. Run it in a `ServiceGroup` (``run()``), or call ``refresh()``.
public final class MetadataService: Service, Sendable {
    /// Where the BLOB comes from and how it is fetched and checked.
    public struct Configuration: Sendable {
        /// The metadata service's URL; FIDO's is ``fidoMDS3``. `https`, or `http` to a loopback
        /// address only (a stand-in in tests).
        public var url: URL
        /// The roots and CRLs the BLOB's signing chain is verified with (default: the FIDO MDS
        /// root). Its `refuseStale` is set by the service. Its `minimumSerial` is the lowest `no`
        /// the service installs, fetched or cached: set it to the highest `no` of the BLOBs the
        /// engine was given otherwise (`webauthn serve --mds-blob` does), or an older BLOB fetched
        /// later replaces their entries (red team: a revoked model's status was rolled back).
        public var verification: FIDOMetadata.BLOBOptions
        /// A folder for the last good BLOB (`mds-blob.jwt`, and its HTTP validators beside it);
        /// nil: no cache. Created when missing.
        public var cacheDirectory: String?
        /// Seconds without progress before a fetch fails. Default 30.
        public var requestTimeout: TimeInterval
        /// Seconds a whole fetch may take, however slowly the body arrives. Default 120.
        public var deadline: TimeInterval
        /// The shortest wait between successful fetches, even when `nextUpdate` has passed. Default 1 hour.
        public var minimumInterval: TimeInterval
        /// The longest wait between successful fetches, however far `nextUpdate` is: FIDO may
        /// publish a status change before it. Default 24 hours.
        public var maximumInterval: TimeInterval
        /// At most this much is added at random to the wait after a success, so that
        /// instances do not fetch together. Default 30 minutes.
        public var jitter: TimeInterval
        /// The wait after a first failure; it doubles with each further one. Default 60 seconds.
        public var retryInterval: TimeInterval
        /// The longest wait after failures. Default 1 hour.
        public var maximumRetryInterval: TimeInterval
        /// When set, asked before each verification for the CRLs to check the BLOB's chain with,
        /// instead of `verification`'s: CRLs have their own nextUpdate, and a process that read
        /// them once at start refused every BLOB after it until restarted (`webauthn serve` reads
        /// its `--metadata-crl` files again; an operator replaces them without a restart). Nil
        /// from it: keep `verification`'s.
        package var revocationLists: (@Sendable () -> [CertificateRevocationList]?)?

        /// FIDO Alliance's metadata service, MDS3.
        public static let fidoMDS3 = URL(string: "https://mds3.fidoalliance.org/")!

        /// A configuration; each parameter sets the property of the same name, with its documented default.
        public init(
            url: URL = fidoMDS3, verification: FIDOMetadata.BLOBOptions = FIDOMetadata.BLOBOptions(), cacheDirectory: String? = nil,
            requestTimeout: TimeInterval = 30, deadline: TimeInterval = 120, minimumInterval: TimeInterval = 3600,
            maximumInterval: TimeInterval = 86_400, jitter: TimeInterval = 1800, retryInterval: TimeInterval = 60,
            maximumRetryInterval: TimeInterval = 3600
        ) {
            self.url = url
            self.verification = verification
            self.cacheDirectory = cacheDirectory
            self.requestTimeout = requestTimeout
            self.deadline = deadline
            self.minimumInterval = minimumInterval
            self.maximumInterval = maximumInterval
            self.jitter = jitter
            self.retryInterval = retryInterval
            self.maximumRetryInterval = maximumRetryInterval
        }
    }

    /// What one fetch did.
    public enum Outcome: Sendable {
        /// A newer BLOB was verified and installed.
        case installed(serial: Int)
        /// The service answered `304 Not Modified`, or sent the installed BLOB's `no` again.
        case unchanged
        /// The fetch failed; the installed BLOB, if any, stays.
        case failed(WebAuthnError)

        /// `installed`, `unchanged`, or the failure's error code (a metrics label).
        public var label: String {
            switch self {
            case .installed: "installed"
            case .unchanged: "unchanged"
            case .failed(let error): error.code.rawValue
            }
        }
    }

    /// What is installed, and how fetching goes.
    public struct Status: Sendable {
        /// The installed BLOB's serial number (`no`); nil until a BLOB is installed.
        public package(set) var serial: Int?
        /// The installed BLOB's `nextUpdate`.
        public package(set) var nextUpdate: Date?
        /// The installed BLOB's number of entries.
        public package(set) var entries = 0
        /// Whether the installed BLOB came from the disk cache (and no fetch has installed one since).
        public package(set) var fromCache = false
        /// When the installed BLOB was last confirmed current: installed from the service, or
        /// the service answered 304 or the same `no` (for a cached BLOB, the cache file's time).
        public package(set) var confirmedAt: Date?
        /// When the last fetch started.
        public package(set) var lastAttempt: Date?
        /// What the last fetch did.
        public package(set) var lastOutcome: Outcome?
        /// Failed fetches since the last success.
        public package(set) var consecutiveFailures = 0
        /// Fetches since the service was made, by ``Outcome/label`` (`installed`, `unchanged`, an error code).
        public package(set) var fetches: [String: Int] = [:]
        /// When ``MetadataService/run()`` fetches next.
        public package(set) var nextAttempt: Date?

        /// No BLOB, no fetch yet.
        package init() {}

        /// Whether a verified BLOB is installed.
        public var isInstalled: Bool { serial != nil }

        /// Seconds since the installed BLOB was last confirmed current, at `now`; nil without one.
        public func age(at now: Date) -> TimeInterval? { confirmedAt.map { max(0, now.timeIntervalSince($0)) } }
    }

    /// The configuration it runs with.
    public let configuration: Configuration
    let engine: WebAuthnEngine
    let base: TrustAnchors
    let clock: WebAuthnClock
    let sleep: @Sendable (Duration) async throws -> Void
    let logger: Logger
    let onInstall: @Sendable (FIDOMetadata) async -> Void
    let state = Locked(State())
    let inflight = Locked<Task<Outcome, Never>?>(nil)

    struct State {
        var status = Status()
        var validators = Validators()
    }

    /// The HTTP validators of the installed BLOB, for conditional requests.
    struct Validators: Equatable {
        var etag: String?
        var lastModified: String?

        /// Header values echoed back to the service: visible ASCII only, at most 256 bytes.
        init(etag: String? = nil, lastModified: String? = nil) {
            func clean(_ value: String?) -> String? {
                guard let value, !value.isEmpty, value.utf8.count <= 256, value.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else { return nil }
                return value
            }
            self.etag = clean(etag)
            self.lastModified = clean(lastModified)
        }
    }

    /// A service that installs metadata into `engine`, on top of the trust anchors the engine
    /// has now (its format roots, CRLs and any metadata loaded from files): each BLOB's entries
    /// replace the previous BLOB's.
    ///
    /// - Parameters:
    ///   - configuration: where the BLOB comes from and how it is checked.
    ///   - engine: the engine whose trust anchors it keeps current.
    ///   - clock: the time BLOBs are verified at and fetches are dated by; nil: the engine's clock.
    ///   - sleep: how ``run()`` waits between fetches (tests pass one that does not wait).
    ///   - logger: where installs and failures are logged.
    ///   - onInstall: called after each BLOB is installed (a cached one included).
    /// - Throws: `configuration_invalid` when the URL is neither `https` nor `http` to a loopback address.
    public init(
        configuration: Configuration, engine: WebAuthnEngine, clock: WebAuthnClock? = nil,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        logger: Logger = Logger(label: "webauthn.metadata"),
        onInstall: @escaping @Sendable (FIDOMetadata) async -> Void = { _ in }
    ) throws(WebAuthnError) {
        let url = configuration.url
        guard CappedHTTP.isFetchable(url) else {
            throw WebAuthnError(.configurationInvalid, "the metadata service URL must be https (or http to a loopback address, for a stand-in)")
        }
        self.configuration = configuration
        self.engine = engine
        self.base = engine.trustAnchors
        self.clock = clock ?? engine.relyingParty.clock
        self.sleep = sleep
        self.logger = logger
        self.onInstall = onInstall
    }

    /// What is installed, and how fetching goes.
    public var status: Status { state.withLock { $0.status } }

    /// Loads the cached BLOB (if any), then fetches now and after each wait the schedule
    /// sets, until the task is cancelled or the service group shuts down gracefully.
    public func run() async throws {
        if !status.isInstalled { await loadCache() }
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    let outcome = await self.refresh()
                    let delay = Self.delay(
                        after: outcome, status: self.status, now: self.clock.now(), configuration: self.configuration, random: Double.random(in: 0..<1))
                    let next = self.clock.now().addingTimeInterval(delay)
                    self.state.withLock { $0.status.nextAttempt = next }
                    self.logger.debug("next metadata fetch", metadata: ["in_seconds": .stringConvertible(Int(delay))])
                    try await self.sleep(.milliseconds(Int64(delay * 1000)))
                }
            }
        } catch is CancellationError {
            return
        }
    }

    /// The wait before the next fetch, in seconds. After a success: until the installed BLOB's
    /// `nextUpdate`, kept within ``Configuration/minimumInterval`` and
    /// ``Configuration/maximumInterval``, plus `random` (0 ..< 1) times the jitter. After failures:
    /// ``Configuration/retryInterval`` doubled for each further consecutive failure, at most
    /// ``Configuration/maximumRetryInterval``, scaled by 0.5 + `random` / 2.
    package static func delay(after outcome: Outcome, status: Status, now: Date, configuration c: Configuration, random: Double) -> TimeInterval {
        let random = min(max(random, 0), 1)
        if case .failed = outcome {
            let doublings = Double(min(max(status.consecutiveFailures, 1) - 1, 30))
            let backoff = min(c.maximumRetryInterval, c.retryInterval * pow(2, doublings))
            return max(1, backoff * (0.5 + random / 2))
        }
        let untilNext = status.nextUpdate.map { $0.timeIntervalSince(now) } ?? c.maximumInterval
        return max(1, min(max(untilNext, c.minimumInterval), c.maximumInterval) + c.jitter * random)
    }

    /// Fetches the BLOB now, unless a fetch is running, whose outcome it then returns: a newer
    /// verified BLOB is installed; anything else keeps the installed one.
    @discardableResult
    public func refresh() async -> Outcome {
        let task = inflight.withLock { current -> Task<Outcome, Never> in
            if let current { return current }
            let task = Task { await self.fetch() }
            current = task
            return task
        }
        return await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
    }

    func fetch() async -> Outcome {
        defer { inflight.withLock { $0 = nil } }
        let started = clock.now()
        let (held, validators) = state.withLock { ($0.status.serial, $0.validators) }
        var request = URLRequest(url: configuration.url)
        request.httpMethod = "GET"
        if held != nil {
            if let etag = validators.etag { request.setValue(etag, forHTTPHeaderField: "If-None-Match") }
            if let modified = validators.lastModified { request.setValue(modified, forHTTPHeaderField: "If-Modified-Since") }
        }
        let outcome: Outcome
        do throws(WebAuthnError) {
            let response = try await CappedHTTP.send(
                request, maxBytes: FIDOMetadata.maxSize, timeout: configuration.requestTimeout, deadline: configuration.deadline,
                redirects: .httpsOnly, failure: .metadataUnavailable)
            let received = Validators(etag: response.header("ETag"), lastModified: response.header("Last-Modified"))
            switch response.status {
            case 304 where held != nil:
                // Confirmed only while the installed BLOB is current: a 304 for one past its
                // nextUpdate (and its day of grace) froze updates while the age stayed fresh.
                if let next = status.nextUpdate, started > next.addingTimeInterval(86_400) {
                    throw WebAuthnError(.metadataStale, "the metadata service answered 304 Not Modified for a BLOB past its nextUpdate (\(next))")
                }
                state.withLock { $0.status.confirmedAt = started }
                outcome = .unchanged
            case 200:
                outcome = try await accept(response.body, validators: received)
            default:
                throw WebAuthnError(.metadataUnavailable, "the metadata service answered HTTP \(response.status)")
            }
        } catch {
            outcome = .failed(error)
        }
        record(outcome, at: started)
        return outcome
    }

    /// The verification options, with the CRLs of ``Configuration/revocationLists`` when it gives some.
    func currentVerification() -> FIDOMetadata.BLOBOptions {
        var options = configuration.verification
        if let lists = configuration.revocationLists?() { options.crls = lists }
        return options
    }

    /// Verifies a fetched BLOB and installs it when its `no` is greater than the installed one's.
    func accept(_ bytes: [UInt8], validators: Validators) async throws(WebAuthnError) -> Outcome {
        let now = clock.now()
        var options = currentVerification()
        options.refuseStale = true
        let blob = try FIDOMetadata.blob(jwt: bytes, at: now, options: options)
        guard let serial = blob.serial else { throw WebAuthnError(.metadataInvalid, "the BLOB has no serial number (no)") }
        switch install(blob, validators: validators, confirmedAt: now, fromCache: false) {
        case .orderedAscending:
            writeCache(bytes, validators: validators)
            await onInstall(blob)
            return .installed(serial: serial)
        case .orderedSame:
            return .unchanged
        case .orderedDescending:
            let held = status.serial ?? 0
            throw WebAuthnError(.metadataStale, "the metadata service sent BLOB no \(serial); no \(held) is installed and only a greater no replaces it")
        }
    }

    /// Installs `blob` if its `no` is greater than the installed one's (`.orderedAscending`);
    /// the same `no` refreshes the validators and confirmation time (`.orderedSame`).
    func install(_ blob: FIDOMetadata, validators: Validators, confirmedAt: Date, fromCache: Bool) -> ComparisonResult {
        guard let serial = blob.serial else { return .orderedDescending }
        return state.withLock { s -> ComparisonResult in
            if let held = s.status.serial, serial <= held {
                if serial == held, !fromCache {
                    s.status.confirmedAt = confirmedAt
                    s.validators = validators
                    return .orderedSame
                }
                return .orderedDescending
            }
            var anchors = base
            anchors.add(blob.entries)
            engine.updateTrustAnchors(anchors)
            s.status.serial = serial
            s.status.nextUpdate = blob.nextUpdate
            s.status.entries = blob.entries.count
            s.status.fromCache = fromCache
            s.status.confirmedAt = confirmedAt
            s.validators = validators
            return .orderedAscending
        }
    }

    func record(_ outcome: Outcome, at started: Date) {
        let (serial, failures) = state.withLock { s -> (Int?, Int) in
            s.status.lastAttempt = started
            s.status.lastOutcome = outcome
            if case .failed = outcome { s.status.consecutiveFailures += 1 } else { s.status.consecutiveFailures = 0 }
            s.status.fetches[outcome.label, default: 0] += 1
            return (s.status.serial, s.status.consecutiveFailures)
        }
        let kept: Logger.MetadataValue = serial.map { .stringConvertible($0) } ?? "none"
        switch outcome {
        case .installed(let serial):
            logger.notice("metadata BLOB installed", metadata: ["no": .stringConvertible(serial), "entries": .stringConvertible(status.entries)])
        case .unchanged:
            logger.info("metadata BLOB unchanged", metadata: ["no": kept])
        case .failed(let error):
            logger.warning(
                "metadata fetch failed; the installed BLOB stays",
                metadata: [
                    "code": .string(error.code.rawValue), "reason": .string(error.message), "no": kept, "consecutive_failures": .stringConvertible(failures),
                ])
        }
    }
}
