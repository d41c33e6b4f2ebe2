internal import CoreMetrics
internal import Foundation
internal import HTTPTypes
internal import Hummingbird
internal import Prometheus
internal import WebAuthnCore
internal import WebAuthnMetadata
internal import NIOCore
internal import _WebAuthnEncoding

/// Who may read `GET /metrics` (Prometheus text format). The metrics hold counts, durations
/// and metadata state, never a name, credential, key, cookie or address; the codes of failed
/// sign-ins are counted as the client saw them (`authentication_failed`), so the metrics are no
/// better an oracle than the answers.
public enum MetricsExposure: String, Sendable, CaseIterable {
    /// Not served (404).
    case off
    /// Only to a client on a loopback address whose request came through no proxy (none of the
    /// headers proxies add: `X-Forwarded-For`, `Forwarded`, `X-Real-IP`, `Via`, ...); 404 to anyone else. The default: a
    /// Prometheus agent on the same host, while a reverse proxy in front relays nobody to it.
    case loopback
    /// To anyone who reaches the port: restrict it in front of the server.
    case anyone
}

/// The counters and timers the routes record, in swift-metrics, through one factory.
struct RouteMetrics: Sendable {
    let factory: any MetricsFactory
    /// A ceremony's counter and timer, by ceremony and answered code, made once each: making a
    /// handle looks it up in the factory's registry (Prometheus: under its lock, by label and
    /// dimensions) and allocates, for every ceremony request. The keys are the routes' names and
    /// the catalogue's codes, so the table stays small.
    private let handles = Locked<[CeremonyKey: (counter: CoreMetrics.Counter, timer: CoreMetrics.Timer)]>([:])

    private struct CeremonyKey: Hashable {
        let ceremony: String
        let code: String
    }

    init(factory: any MetricsFactory) {
        self.factory = factory
        // The failure counters exist from the start, at 0, so that a scrape before the first failure
        // finds them (an alert on their rate needs the series; operator review, helper 72: /metrics was
        // empty until the first ceremony).
        for scope in Self.throttledScopes {
            CoreMetrics.Counter(label: "webauthn_throttled_total", dimensions: [("scope", scope)], factory: factory).increment(by: 0)
        }
        CoreMetrics.Counter(label: "webauthn_store_errors_total", dimensions: [("kind", "storage")], factory: factory).increment(by: 0)
    }

    /// The scopes of `webauthn_throttled_total`.
    static let throttledScopes = ["address", "session", "failures", "changes"]

    /// The duration buckets of `webauthn_ceremony_duration_seconds` (a ceremony takes about a millisecond).
    static let durationBuckets: [Duration] = [
        .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
        .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5),
    ]

    /// One ceremony request: `ceremony` (registration_options, registration, authentication_options,
    /// authentication), its outcome and the code the client was answered with (`ok` on success).
    func ceremony(_ ceremony: String, code: String, duration: Duration) {
        let key = CeremonyKey(ceremony: ceremony, code: code)
        let (counter, timer) = handles.withLock { handles in
            if let made = handles[key] { return made }
            let outcome = code == "ok" ? "success" : "failure"
            let made = (
                counter: CoreMetrics.Counter(
                    label: "webauthn_ceremonies_total", dimensions: [("ceremony", ceremony), ("outcome", outcome), ("code", code)], factory: factory),
                timer: CoreMetrics.Timer(label: "webauthn_ceremony_duration_seconds", dimensions: [("ceremony", ceremony)], factory: factory)
            )
            handles[key] = made
            return made
        }
        counter.increment()
        timer.recordNanoseconds(Int64(duration.components.seconds) * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// A request refused by a token bucket; `scope` address, session or failures.
    func throttled(scope: String) {
        CoreMetrics.Counter(label: "webauthn_throttled_total", dimensions: [("scope", scope)], factory: factory).increment()
    }

    /// A store or driver failure answered with `internal_error`.
    func storeError() {
        CoreMetrics.Counter(label: "webauthn_store_errors_total", dimensions: [("kind", "storage")], factory: factory).increment()
    }
}

/// `GET /healthz`, `/readyz` and `/metrics`, for orchestrators and monitoring.
struct OperationsRoutes: Sendable {
    let engine: WebAuthnEngine
    let metadata: MetadataService?
    let exposure: MetricsExposure
    let export: PrometheusExport?
    /// The last store probe and when it ran: probes within a second share it, so a flood of
    /// `/readyz` costs the store at most one lookup a second.
    let lastProbe = Locked<(at: ContinuousClock.Instant, ok: Bool)?>(nil)

    /// A probe credential ID no credential has (a primary-key lookup that finds nothing).
    static let probe = Array("webauthn readiness probe".utf8)
    /// How long the store may take to answer the readiness probe.
    static let storeTimeout: Duration = .seconds(2)

    func add<Methods: RouterMethods>(to router: Methods) {
        router.get("/healthz") { _, _ in Self.json(["status": "ok"]) }
        router.get("/readyz") { _, _ in await readiness() }
        router.get("/metrics") { request, context in
            guard let export, Self.mayRead(exposure, request: request, peer: (context as? any RemoteAddressRequestContext)?.remoteAddress) else {
                throw HTTPError(.notFound)  // the answer of a path nothing serves (RouteTable)
            }
            recordMetadata()
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: export.registry.emitToBuffer())))
        }
    }

    /// Ready (200) once the store answers a lookup within two seconds and, when a metadata
    /// service is configured, a verified BLOB is installed; otherwise 503 with what is missing.
    func readiness() async -> Response {
        let store: Bool
        if let last = lastProbe.withLock({ $0 }), ContinuousClock.now - last.at < .seconds(1) {
            store = last.ok
        } else {
            store = await Self.answers(within: Self.storeTimeout) { [engine] in _ = try await engine.credentials.credential(id: Self.probe) }
            lastProbe.withLock { $0 = (ContinuousClock.now, store) }
        }
        let metadataReady = metadata?.status.isInstalled ?? true
        var body: JSONObject = ["status": .string(store && metadataReady ? "ready" : "not_ready"), "store": .string(store ? "ok" : "failed")]
        if let metadata { body["metadata"] = .string(metadata.status.isInstalled ? "installed" : "missing") }
        return Self.json(.object(body), status: store && metadataReady ? .ok : .serviceUnavailable)
    }

    /// Whether `operation` finishes without throwing within `limit` (it is left to finish alone if it does not).
    static func answers(within limit: Duration, _ operation: @escaping @Sendable () async throws -> Void) async -> Bool {
        let state = Locked<(done: Bool, timer: Task<Void, Never>?)>((false, nil))
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            @Sendable func finish(_ value: Bool) {
                let (first, timer) = state.withLock { s -> (Bool, Task<Void, Never>?) in
                    defer { s.done = true }
                    return (!s.done, s.timer)
                }
                guard first else { return }
                timer?.cancel()
                continuation.resume(returning: value)
            }
            let timer = Task {
                try? await Task.sleep(for: limit)
                finish(false)
            }
            state.withLock { $0.timer = timer }
            Task {
                do {
                    try await operation()
                    finish(true)
                } catch {
                    finish(false)
                }
            }
        }
    }

    /// The metadata gauges, set as of now (each scrape).
    func recordMetadata() {
        guard let metadata, let export else { return }
        let factory = export.factory
        let status = metadata.status
        export.count(fetches: status.fetches)
        let now = engine.relyingParty.clock.now()
        func gauge(_ name: String, _ value: Double) { CoreMetrics.Gauge(label: name, factory: factory).record(value) }
        gauge("webauthn_metadata_installed", status.isInstalled ? 1 : 0)
        gauge("webauthn_metadata_age_seconds", status.age(at: now) ?? 0)
        gauge("webauthn_metadata_blob_number", Double(status.serial ?? 0))
        gauge("webauthn_metadata_next_update_timestamp_seconds", status.nextUpdate?.timeIntervalSince1970 ?? 0)
        gauge("webauthn_metadata_entries", Double(status.entries))
        let succeeded: Double =
            switch status.lastOutcome {
            case .installed, .unchanged: 1
            case .failed, nil: 0
            }
        gauge("webauthn_metadata_last_fetch_success", succeeded)
        gauge("webauthn_metadata_last_fetch_timestamp_seconds", status.lastAttempt?.timeIntervalSince1970 ?? 0)
        gauge("webauthn_metadata_consecutive_failures", Double(status.consecutiveFailures))
    }

    /// Headers a reverse proxy adds to what it relays: any of them, and the loopback exposure
    /// refuses (red team, thirteenth pass: nginx set up with `X-Real-IP` alone relayed anyone to
    /// `/metrics` from the same host).
    static let proxyHeaders: [HTTPField.Name] = [
        "X-Forwarded-For", "Forwarded", "X-Real-IP", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "X-Client-IP", "True-Client-IP",
        "CF-Connecting-IP", "Fastly-Client-IP", "X-Cluster-Client-IP", "Via", "X-Forwarded", "Forwarded-For", "X-Original-Forwarded-For",
        "X-Envoy-External-Address", "X-Forwarded-Server", "X-ProxyUser-Ip", "Client-IP",
    ].compactMap { HTTPField.Name($0) }

    /// `exposure` applied to a request from `peer`.
    static func mayRead(_ exposure: MetricsExposure, request: Request, peer: SocketAddress?) -> Bool {
        switch exposure {
        case .off: return false
        case .anyone: return true
        case .loopback:
            guard !proxyHeaders.contains(where: { request.headers[$0] != nil }), let address = peer?.ipAddress else { return false }
            return ["127.0.0.0/8", "::1/128"].compactMap(CIDR.init).contains { $0.contains(address) }
        }
    }

    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: value.serializedBytes())))
    }
}

/// A Prometheus registry and the swift-metrics factory over it, one per application.
struct PrometheusExport: Sendable {
    let registry: PrometheusCollectorRegistry
    let factory: any MetricsFactory
    /// The metadata fetches counted so far, by result.
    let counted = Locked<[String: Int]>([:])

    init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["webauthn_ceremony_duration_seconds"] = RouteMetrics.durationBuckets
        self.factory = factory
    }

    /// `webauthn_metadata_fetches_total{result}`: the service's counts since its start, added as increments.
    func count(fetches: [String: Int]) {
        let increments = counted.withLock { counted -> [(String, Int)] in
            var increments: [(String, Int)] = []
            for (result, total) in fetches where total > counted[result, default: 0] {
                increments.append((result, total - counted[result, default: 0]))
                counted[result] = total
            }
            return increments
        }
        for (result, increment) in increments {
            CoreMetrics.Counter(label: "webauthn_metadata_fetches_total", dimensions: [("result", result)], factory: factory).increment(by: increment)
        }
    }
}
